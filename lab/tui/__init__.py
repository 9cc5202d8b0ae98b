"""The Textual lab: every NameServer's route tables live, chaos and time at your fingertips.

model.py turns event records into what the widgets show; guest.py runs the cluster on trio inside
Textual's asyncio loop; replay.py plays a recorded event log into the same model; app.py is the App.
"""
