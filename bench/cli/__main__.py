"""`python -m bench.cli` (as under torchrun): the `pipebench` command."""
import sys

from .main import main

sys.exit(main())
