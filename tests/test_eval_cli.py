"""eval.py's contract, in a fresh process as users run it: a mistyped run directory is the
first and only error, one `error:` line (TensorFlow's start-up notices hidden by the entry
itself) and exit status 2. What eval.py does once started is tested in the test's own
process: tests/evaluation/test_run.py (errors, progress, the run's record) and
tests/evaluation/test_watch.py (--watch beside a trainer)."""

from tests.entries import assert_one_error_line, run_entry


def test_a_mistyped_run_dir_is_the_first_and_only_error(tmp_path):
  """`eval.py --checkpoint_path=TYPO` alone: the checkpoint's line, naming the run dir
  beside it, not --model_name (which the run's record would have given)."""
  (tmp_path / 'ucf101_rgb_s1').mkdir()
  typo = str(tmp_path / 'ucf101_rgb_s2')
  assert_one_error_line(run_entry(['eval.py', '--checkpoint_path=%s' % typo]),
                        'error: --checkpoint_path=%s: no such checkpoint, file or directory '
                        '(similar: %s); give a training directory' % (
                            typo, tmp_path / 'ucf101_rgb_s1'))
