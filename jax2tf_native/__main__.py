import sys

from jax2tf_native.cli import main

sys.exit(main())
