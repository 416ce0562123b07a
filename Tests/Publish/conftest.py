"""The publish tests' fixtures live in publish_support.py and fault_link.py (importable by the tests too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fault_link import fault_link  # noqa: E402,F401
from publish_support import janus_any_ice, janus_room, net, pattern_y4m, receiver_factory, workdir  # noqa: E402,F401
