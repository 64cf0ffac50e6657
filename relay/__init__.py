"""The relay: one long training run carried in short segments on machines that come and go.

A GPU machine is lent for minutes at a time, and nothing on it survives its loan but what is
committed to the repository. A run folder (``checkpoints/paper-run/`` for the paper's run)
holds what the next segment needs: the run's config, the training state of one step packed
into files the machine can give back, the trainer's metrics, and the record ``relay.jsonl``,
one line per segment. ``python -m relay segment FOLDER OUT`` trains one segment from it
(docs/training.md, "The paper's run, in segments"):

1. unpack the committed state (``relay.state_pack``) and check it against the record;
2. regenerate exactly the segment's shards on the host's cores, in the background, ahead of
   training (``relay.shards``);
3. replay the last steps of the previous segment from the committed state and compare the
   state reached with the digest that segment recorded, bit for bit (``relay.digest``):
   IDENTICAL, DIFFERENT (with the reason: ``relay.machine``) or none for the first segment;
4. train until the time budget, then commit the state of that step and train ``replay_steps``
   more, whose digest the next segment replays to (``relay.training``);
5. score the EMA weights of the state it started from, beside the training, on the host's
   cores (``relay.scoring``);
6. write the new run folder to OUT and the segment's line to its record (``relay.segment``;
   the folder's layout and checks: ``relay.folder``).

``python -m relay take OUT/NAME FOLDER`` checks what came back and puts it in place for a
commit. The package is a repository tool, like ``speed/`` and ``studies/``: not installed.
"""
