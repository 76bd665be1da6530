"""python -m isvc_operator: the controller."""

import sys

from isvc_operator._main import main

sys.exit(main())
