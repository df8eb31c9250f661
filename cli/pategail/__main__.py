import sys

from pategail.cli import main

sys.exit(main())
