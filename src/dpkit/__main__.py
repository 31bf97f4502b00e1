"""``python -m dpkit``: the ``dpkit`` command line."""

from dpkit.cli.main import app

if __name__ == "__main__":
    app(prog_name="dpkit")
