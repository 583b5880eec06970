"""The trajectory viewer: a local web page over a run store, live while the run
writes to it. It only ever reads: the database is opened read-only (WAL lets it
read while fleet workers and learners write), and every list it serves is paged.
"""
