"""Reading the record back: the episode timeline, one episode whole, and the search index over the archive.

The room above `episodes/` and `archive/` that only reads what they wrote, through their own readers
(`episodes.store`, `archive.record`/`archive.scan`); it never writes a record. The search index it keeps
under `.ai/local/state/` is derived: deleting it loses nothing. Nothing on the hook path imports this room.
"""
