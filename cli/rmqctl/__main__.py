"""`python -m cli.rmqctl`: the same as the `rmqctl` script."""

from cli.rmqctl import main

main(prog_name="rmqctl")
