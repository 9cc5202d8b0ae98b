"""A team's own RocketMQ application as a node of the lab (`nslab run NAME --app 'CMD'`).

- spec: what an app is (a scenario's [[app]] table or --app) and how its command line is made
- process: the app's process: started, stopped (SIGTERM, then SIGKILL after its grace), its exit
- wire_watch: what the app did, read from the frames on its relayed links (app.* records), and its
  routes' broker addresses rewritten to its relays
- node: the app in a running cluster: its relays, its environment, its records
"""
