"""Storage: the database and what lives beside it, for SQLite and PostgreSQL alike.

- ``db``: ``Database`` (engines, read and write transactions, the SQLite writer lock);
  ``urls``: the contract's database URLs and their drivers; ``watched``: a PostgreSQL
  transaction held to its deadline; ``commit_listeners``: what a commit changed, told to the
  process's caches; ``tables/``: the schema (SQLAlchemy Core), a module per part of the
  service; ``migrations/``: Alembic revisions, applied by ``Database.migrate``.
- ``executor``: what repositories run statements on (``Executor``); ``inline``: a synchronous
  connection awaited inline; ``direct``: a short command's database (the CLI's accounts, keys
  and ``migrate``), one connection without the async engine, whose import (SQLAlchemy's ORM)
  outweighed the rest.
- ``bulk``: the bulk writes the repositories share (many rows in one statement or one
  executemany, compiled once per shape), and the backend's ``INSERT … ON CONFLICT``.
- ``sqlite``: how every SQLite connection is set up (WAL, pragmas, ``BEGIN IMMEDIATE``);
  ``sqlite_writer``: the SQLite batch writer behind ``Database.write_batch``, taking turns
  with the other processes on the file; ``writers_queue``: the queue of a process's SQLite
  writers, waited in until a writer's deadline at most.
- ``freshness/``: the change stamps every write bumps and the per-backend trackers that tell
  the in-memory caches whether anything changed (SQLite's ``PRAGMA data_version``,
  PostgreSQL's ``NOTIFY``).
- ``group_commit``: many writes waiting at once share one transaction and one commit.
- ``instance``: values the instance keeps about itself; ``crypto``: secrets at rest (the
  encryption key for webhook secrets, kept per instance).

May import: ``core`` and ``settings``. The domain packages and the HTTP layer build on it.
"""
