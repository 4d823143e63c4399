"""``python -m gpuexec``: the ``gpuexec`` command."""

import sys

from gpuexec.cli import main

sys.exit(main())
