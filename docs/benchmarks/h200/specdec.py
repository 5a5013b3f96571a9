"""`specdec-tui` where it is not installed (the device's /tmp/site + PYTHONPATH): mlx.launch
runs a script, and this is the CLI as one."""

import sys

from core.cli import main

if __name__ == "__main__":
    sys.exit(main())
