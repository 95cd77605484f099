"""`python -m course_lib <command>`: the course's command line, in course_lib/tooling/cli.py."""

import sys

from course_lib.tooling.cli import main

if __name__ == "__main__":
    sys.exit(main())
