"""The doctor, `python -m training.doctor` (see its `__main__`): why N clones are slower
than 1 on this machine.

By concept: `settings` (its own flags), `measure` (the timings, in `rounds`: the alternating
rounds every benchmark times with too), `verdicts` (the rules),
`report` (table, JSON, plot) and `diagnosis` (`run_doctor`, which ties them together).
"""
