from memory_tencentdb.cli import main

raise SystemExit(main())
