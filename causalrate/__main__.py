from causalrate.cli import main

raise SystemExit(main())
