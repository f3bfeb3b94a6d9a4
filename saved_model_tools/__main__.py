import sys

from saved_model_tools.cli import main

sys.exit(main())
