"""Simulated RocketMQ 5 broker replica groups driving the controller over its HTTP API (issue 16).

    python -m tools.brokersim -a 127.0.0.1:9770,127.0.0.1:9771,127.0.0.1:9772 --groups 2 --replicas 3

See tools/brokersim/sim.py for what a simulated broker does and docs/brokersim.md for its files.
"""
