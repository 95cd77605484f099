"""`python -m course_lib <command>`: the course's command line, in course_machinery/cli.py."""

import sys

from course_machinery.cli import main

if __name__ == "__main__":
    sys.exit(main())
