"""``python -m tidegate.torch script.py [args]``: run an unchanged training script on tidegate.

Registers the backend and, under mpirun or srun, sets the rank variables init_process_group
reads (see tidegate.torch.adopt_launcher_environment), then runs the script as ``__main__``.
"""

import runpy
import sys

import tidegate.torch  # noqa: F401  (registers the backend, adopts the launcher's variables)


def main():
    """Run sys.argv[1] as the main module with the remaining arguments."""
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tidegate.torch script.py [args...]")
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
