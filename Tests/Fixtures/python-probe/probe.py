#!/usr/bin/env python3
"""python-probe: a scriptable extension on the `extension_runtime` package, for
Tests/IntegrationTests/PythonPackageTests.swift. Each request channel takes line commands:

  observe NAME   -> observes the hint NAME, reporting each post on this channel as
                    "notified NAME"; answers "observing", or "refused: <exception>: <message>"
  reason N       -> perform_expiring_activity with a reason of N bytes ('r'): "granted" (fn
                    returns at once) or "denied" from fn, or "refused: <exception>: <message>"
  environ        -> "EXTENSIOND_CHANNEL_FD in os.environ: <bool>"
  complete-text T
                 -> Request.complete with the str T: "completed", or "refused: <exception>: <message>"
  complete T     -> Request.complete with T encoded, as a bytearray: likewise (once the request
                    is over, the extension may be suspended before it answers)
  start-again    -> start() a second time: "started", or "refused: <exception>: <message>"
  observe-many N PREFIX
                 -> observes PREFIX.1 to PREFIX.N likewise, stopping at the first exception:
                    "observed N", or "observed K, then refused: <exception>: <message>"
  open-url URL   -> open_url: "opened True" or "opened False", or "refused: <exception>: <message>"
  defaults-open SUITE
                 -> defaults(SUITE), reporting each change on this channel as "changed SUITE":
                    "opened", or "refused: <exception>: <message>"
  secret-add SERVICE ACCOUNT DATA, secret-copy SERVICE ACCOUNT
                 -> generic passwords: "added" / "found DATA in GROUP", or "refused: <exception>: <message>"
  defaults-get KEY, defaults-set KEY VALUE (a str)
                 -> on that suite: "value <repr>" / "set", or "refused: <exception>: <message>"
"""
import os
import sys

import extension_runtime as rt
from extension_runtime import secrets


def answer(channel, line: str) -> None:
    channel.sendall((line + "\n").encode())


# The suite opened last by defaults-open.
suites: dict = {}


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
            elif command == "open-url":
                try:
                    answer(channel, f"opened {rt.open_url(argument)}")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "defaults-open":
                try:
                    suites["open"] = rt.defaults(argument)
                    suites["open"].on_change(lambda suite: answer(channel, f"changed {suite}"))
                    answer(channel, "opened")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "defaults-get":
                try:
                    answer(channel, f"value {suites['open'][argument]!r}")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "defaults-set":
                key, _, value = argument.partition(" ")
                try:
                    suites["open"][key] = value
                    answer(channel, "set")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "secret-add":
                service, account, data = argument.split(" ", 2)
                try:
                    secrets.add(data.encode(), service=service, account=account)
                    answer(channel, "added")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "secret-copy":
                service, account = argument.split(" ", 1)
                try:
                    item = secrets.copy(service=service, account=account)
                    answer(channel, f"found {item.data.decode()} in {item.group}")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "environ":
                answer(channel, f"EXTENSIOND_CHANNEL_FD in os.environ: {'EXTENSIOND_CHANNEL_FD' in os.environ}")
            elif command in ("complete-text", "complete"):
                try:
                    request.complete(argument if command == "complete-text" else bytearray(argument.encode()))
                    answer(channel, "completed")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "start-again":
                try:
                    rt.start()
                    answer(channel, "started")
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "reason":
                try:
                    rt.perform_expiring_activity(
                        "r" * int(argument), lambda expired: answer(channel, "denied" if expired else "granted"))
                except Exception as error:
                    answer(channel, refused(error))
            elif command == "observe-many":
                count, _, prefix = argument.partition(" ")
                observed = 0
                try:
                    for k in range(1, int(count) + 1):
                        rt.observe(f"{prefix}.{k}", lambda name: answer(channel, f"notified {name}"))
                        observed += 1
                    answer(channel, f"observed {observed}")
                except Exception as error:
                    answer(channel, f"observed {observed}, then {refused(error)}")


try:
    rt.run()
except rt.NotSupervisedError:
    print("python-probe: not launched by extensiond", file=sys.stderr)
    sys.exit(1)
