#!/usr/bin/env python3
"""python-probe: a scriptable extension on the `extension_runtime` package, for
Tests/IntegrationTests/PythonPackageTests.swift. Each request channel takes line commands:

  observe NAME   -> observes the hint NAME, reporting each post on this channel as
                    "notified NAME"; answers "observing", or "refused: <exception>: <message>"
"""
import sys

import extension_runtime as rt


def answer(channel, line: str) -> None:
    channel.sendall((line + "\n").encode())


def refused(error: Exception) -> str:
    return f"refused: {type(error).__name__}: {error}"


@rt.request_handler
def serve(request: rt.Request) -> None:
    channel = request.channel
    with channel, channel.makefile("rb", buffering=0) as lines:
        for line in lines:
            command, _, argument = line.decode().strip().partition(" ")
            if command == "observe":
                try:
                    rt.observe(argument, lambda name: answer(channel, f"notified {name}"))
                    answer(channel, "observing")
                except Exception as error:
                    answer(channel, refused(error))


try:
    rt.run()
except rt.NotSupervisedError:
    print("python-probe: not launched by extensiond", file=sys.stderr)
    sys.exit(1)
