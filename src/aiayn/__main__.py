"""`python -m aiayn ...` (what `torchrun -m aiayn train ...` runs)."""

from aiayn.cli import main

raise SystemExit(main())
