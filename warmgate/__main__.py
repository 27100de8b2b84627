"""`python -m warmgate`: the same command line as the `warmgate` console script."""

import sys

from warmgate.cli import main

sys.exit(main())
