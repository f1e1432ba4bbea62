"""``python -m torchport``: the same as the ``torchport`` command."""
import sys

from torchport.cli import main

sys.exit(main())
