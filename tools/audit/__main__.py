from tools.audit.job import main

raise SystemExit(main())
