"""A broken application: it never retries a failed send.

What it gets wrong: the exception send_sync raises when every one of the client's attempts failed
("No route info of this topic", a timeout) is not caught in its send loop. The loop — a worker
thread — ends, nothing says so, and the process runs on: its consumer keeps consuming, its health
looks fine, and it never sends again. (The same app with `except: continue` would drop each failed
message instead: also never retried.)

Which expectation catches it: on app-master-down (the only master of the topic is down for 40 s,
so sends fail until it restarts) app_recovers — no acknowledged send after the master is back —
and app_send_rate outside the fault. app_keeps_running holds: the process never exits.

    nslab run app-master-down --app 'python examples/apps/no_retry_app.py'
"""

from python_app import App, main


class NoRetryApp(App):
    def send(self, n: int) -> None:
        self.send_once(n)  # the mistake: a failure raises out of the produce loop, and its thread ends
        self.sent += 1


if __name__ == "__main__":
    main(NoRetryApp)
