"""What a user does with their memory: see it, correct it, forget it, move it, keep it small.

``browse`` lists memories, scopes, persona and scenes; ``forget`` corrects, deletes and purges;
``transfer`` exports and imports JSONL; ``original`` imports the original project's data
directory; ``retention`` drops old raw messages nothing cites. The gateway routes and the CLI are
thin over these; every SQL statement they need is behind ``MemoryStore`` (``store/base.py``).
"""
