"""tests/prestarted.py against what a fresh `python script.py` gives (subprocess.Popen).

Each case runs the same small script both ways, forked and fresh, and compares what a
test could see: exit status, output, argv, working directory, environment, sys.path's
head, session, signals, a network namespace; then the cases that must start fresh.
"""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests import prestarted

# Compares both ways itself: no stand-in underneath. `slow`: its tests start fresh
# interpreters (5-10 s each), and a file of them starting last kept one core idle.
pytestmark = [pytest.mark.fresh_start, pytest.mark.slow]

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    from tf_compat import tf
    if sys.argv[1:2] == ['raise']:
      raise ValueError('the script failed')
    if sys.argv[1:2] == ['exit']:
      sys.exit(sys.argv[2] if not sys.argv[2].isdigit() else int(sys.argv[2]))
    if sys.argv[1:2] == ['sleep']:
      print('ready', flush=True)
      import time; time.sleep(60)
    with tf.Graph().as_default():
      draw = tf.random.uniform([2])
      with tf.Session() as session:
        drawn = session.run(draw).tolist()
    print(json.dumps(dict(
        argv=sys.argv, cwd=os.getcwd(), marker=os.environ.get('PRESTARTED_MARKER'),
        path0=sys.path[0], name=__name__, file=__file__, stdin=sys.stdin.read(),
        session_leader=os.getsid(0) == os.getpid(), numpy=np.random.randint(1 << 30),
        tf=drawn, network=os.readlink('/proc/self/ns/net'))))
    print('to stderr', file=sys.stderr)
''')


@pytest.fixture
def script(tmp_path):
  path = tmp_path / 'script.py'
  path.write_text(SCRIPT)
  return path


def both(args, **kwargs):
  """(forked, fresh) CompletedProcess of the same command."""
  kwargs.setdefault('capture_output', True)
  kwargs.setdefault('text', True)
  kwargs.setdefault('timeout', 120)
  kwargs.setdefault('env', dict(os.environ, PYTHONPATH=prestarted.ROOT))
  forked = run_forked(args, stdin_text=kwargs.get('input'),
                      **{k: v for k, v in kwargs.items() if k != 'input'})
  fresh = subprocess.run(args, **kwargs, check=False)
  return forked, fresh


def run_forked(args, stdin_text=None, capture_output=False, timeout=None, **kwargs):
  """subprocess.run's answer for a command forked by prestarted.Forked."""
  if capture_output:
    kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  if stdin_text is not None:
    kwargs['stdin'] = subprocess.PIPE
  assert prestarted.forkable(args, kwargs) is not None
  with prestarted.Forked(args, prestarted.parse(args), **kwargs) as process:
    stdout, stderr = process.communicate(stdin_text, timeout=timeout)
  return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def test_a_forked_script_sees_what_a_fresh_one_sees(script, tmp_path):
  import json  # pylint: disable=import-outside-toplevel
  env = dict(os.environ, PRESTARTED_MARKER='m', PYTHONPATH=prestarted.ROOT)
  forked, fresh = both([sys.executable, script.name, 'a', '--b=c'], cwd=str(tmp_path),
                       env=env, input='piped in', start_new_session=True)
  assert forked.returncode == fresh.returncode == 0, (forked.stderr, fresh.stderr)
  assert forked.stderr.endswith('to stderr\n') and fresh.stderr.endswith('to stderr\n')
  seen = [json.loads(result.stdout) for result in (forked, fresh)]
  for key in ('argv', 'cwd', 'marker', 'path0', 'name', 'file', 'stdin', 'session_leader',
              'network'):
    assert seen[0][key] == seen[1][key], key
  assert seen[0]['session_leader'] and seen[0]['stdin'] == 'piped in'


def test_each_forked_child_draws_its_own_random_numbers(script, tmp_path):
  import json  # pylint: disable=import-outside-toplevel
  env = dict(os.environ, PYTHONPATH=prestarted.ROOT)
  draws = [json.loads(run_forked([sys.executable, str(script)], capture_output=True,
                                 text=True, timeout=120, env=env).stdout) for _ in range(2)]
  assert draws[0]['numpy'] != draws[1]['numpy']
  assert draws[0]['tf'] != draws[1]['tf']


@pytest.mark.parametrize('args', [['exit', '3'], ['exit', 'a message'], ['raise']])
def test_exit_status_and_errors_are_the_interpreters(script, args):
  forked, fresh = both([sys.executable, str(script)] + args)
  assert forked.returncode == fresh.returncode
  assert forked.stdout == fresh.stdout
  assert forked.stderr.splitlines()[-1:] == fresh.stderr.splitlines()[-1:]
  assert ('Traceback' in forked.stderr) == ('Traceback' in fresh.stderr)


def test_signals_reach_the_child_and_show_in_its_status(script):
  args = [sys.executable, str(script), 'sleep']
  kwargs = dict(stdout=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=prestarted.ROOT))
  process = prestarted.Forked(args, prestarted.forkable(args, kwargs), **kwargs)
  assert process.stdout.readline() == 'ready\n'
  assert process.poll() is None
  with pytest.raises(subprocess.TimeoutExpired):
    process.wait(0.1)
  process.send_signal(signal.SIGKILL)
  assert process.wait(30) == -signal.SIGKILL
  process.stdout.close()


def test_a_private_network_is_entered_as_nsenter_enters_it(script, tmp_path):
  from deployment.cluster import netns  # pylint: disable=import-outside-toplevel
  try:
    network = netns.PrivateNetwork.create()
  except netns.NamespaceUnavailable as error:
    pytest.skip('no network namespace here: %s' % error)
  import json  # pylint: disable=import-outside-toplevel
  with network:
    args = network.wrap([sys.executable, str(script)])
    assert prestarted.parse(args)[3] == network.pid
    forked, fresh = both(args)
  assert forked.returncode == fresh.returncode == 0, (forked.stderr, fresh.stderr)
  inside = [json.loads(result.stdout)['network'] for result in (forked, fresh)]
  assert inside[0] == inside[1] != os.readlink('/proc/self/ns/net')


OUTER = textwrap.dedent('''
    import subprocess, sys
    inner = subprocess.run([sys.executable, 'inner.py'], capture_output=True, text=True)
    print(inner.returncode, inner.stdout.strip())
    left = subprocess.Popen([sys.executable, 'inner.py', 'sleep'], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    print(left.stdout.readline().strip(), left.pid, flush=True)
''')
INNER = textwrap.dedent('''
    import sys, time
    print('preloaded' if 'tensorflow' in sys.modules else 'fresh', flush=True)
    if sys.argv[1:] == ['sleep']:
      time.sleep(60)
    sys.exit(3)
''')


def test_an_entry_that_a_forked_entry_starts_is_forked_too_and_outlives_it(tmp_path):
  (tmp_path / 'outer.py').write_text(OUTER)
  (tmp_path / 'inner.py').write_text(INNER)
  forked, fresh = both([sys.executable, 'outer.py'], cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=prestarted.ROOT))
  assert forked.returncode == fresh.returncode == 0, (forked.stderr, fresh.stderr)
  lines = [result.stdout.splitlines() for result in (forked, fresh)]
  assert [line[0] for line in lines] == ['3 preloaded', '3 fresh']
  for (_, left), way in zip(lines, ('preloaded', 'fresh')):
    said, pid = left.split()
    assert said == way
    os.kill(int(pid), signal.SIGKILL)  # Still running after the entry's exit: no error.


@pytest.mark.parametrize('args,kwargs', [
    (['-c', 'print(1)'], {}),
    (['-X', 'importtime', 'script.py'], {}),
    (['script.py'], {'shell': False, 'pass_fds': (0,)}),
    (['script.py'], {'env': {'TF_CPP_MIN_LOG_LEVEL': '0'}}),
    (['script.py'], {'preexec_fn': lambda: None}),  # Not picklable to the server.
    (['/elsewhere/script.py'], {}),  # The project's modules not on its path.
])
def test_what_would_differ_starts_fresh(args, kwargs):
  kwargs.setdefault('cwd', prestarted.ROOT)
  assert prestarted.forkable([sys.executable] + args, kwargs) is None
  assert prestarted.forkable(['nsenter', '--target', '1', '--net', '--mount', '--',
                              sys.executable, 'script.py'], {}) is None
  assert prestarted.forkable('python script.py', {}) is None
