"""A broken application: it commits offsets before it processes the messages, then dies mid-run.

What it gets wrong: its consume callback only puts each message on an in-memory queue and returns
at once, so the client counts the message consumed and commits its offset within 5 s; a worker
thread processes the queue more slowly than messages arrive (1 a second against 5). When the queue
holds more than APP_BACKLOG_LIMIT messages (20) the app "runs out of memory" and exits with code 3,
and every message on the queue is lost: the broker has their offsets committed, so neither this app
restarted nor another consumer of the group will ever be given them again.

Which expectation catches it, on any app scenario: app_keeps_running (it exits before the lab stops
it) and, with the history the app writes (APP_HISTORY), app_acked_consumed with `history`: messages
acknowledged to its producer that it never processed, delivered and committed all the same. On the
wire alone the loss is invisible: every one of those messages was delivered.

    nslab run app-broker-crash --app 'python examples/apps/commit_first_app.py'
"""

import os
import queue
import sys
import threading

from python_app import App, main, say


class CommitFirstApp(App):
    def __init__(self, args):
        super().__init__(args)
        self.backlog: queue.Queue = queue.Queue()
        self.limit = int(os.environ.get("APP_BACKLOG_LIMIT", "20"))
        threading.Thread(target=self.work, name="work", daemon=True).start()

    def on_message(self, msg) -> None:
        # The mistake: returning acknowledges the message (its offset is committed) before it is processed.
        self.backlog.put((msg.topic, msg.queue_id, msg.queue_offset, msg.id))
        if self.backlog.qsize() > self.limit:
            say(f"{self.backlog.qsize()} messages waiting: out of memory")
            sys.stdout.flush()
            os._exit(3)

    def work(self) -> None:
        while True:
            topic, queue_id, offset, uniq_key = self.backlog.get()
            self.stopping.wait(1.0)  # slow processing: a message a second
            with self.lock:
                self.received.add(uniq_key)
            self.write(op="receive", topic=topic, queue=queue_id, offset=offset, uniq_key=uniq_key, ok=True)


if __name__ == "__main__":
    main(CommitFirstApp)
