"""`python -m benchmarks [--quick] [--only GROUPS] [--out DIR]`: see benchmarks/run.py."""
import sys

from benchmarks.run import main

sys.exit(main())
