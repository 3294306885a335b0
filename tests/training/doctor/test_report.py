"""Tests of training/doctor/report.py on a diagnosis written by hand: the table, the JSON
and a PNG that an independent reader (Pillow) opens."""

import json
import os

from PIL import Image

from deployment.trace.placement import ClonePlacement, VisibleDevices
from training.doctor import report, verdicts
from training.doctor.diagnosis import Diagnosis
from training.doctor.measure import FULL, INPUT, SYNTHETIC, Measurement

CPU = '/job:localhost/replica:0/task:0/device:CPU:%d'


def _diagnosis(failed_at_two=False, **run_changes):
  synthetic_two = (Measurement(SYNTHETIC, 2, None, None,
                               error='out of memory (ResourceExhaustedError)')
                   if failed_at_two else
                   Measurement(SYNTHETIC, 2, 420.0, 0.1524, (380.0, 420.0, 480.0)))
  measurements = (Measurement(INPUT, None, 5000.0, 0.0064, (5000.0,)),
                  Measurement(SYNTHETIC, 1, 400.0, 0.08, (400.0, 390.0, 410.0)),
                  synthetic_two, Measurement(FULL, 2, 410.0, 0.1561, (410.0, 400.0, 430.0)))
  placements = (ClonePlacement(0, 'clone_0', '/device:CPU:0', {CPU % 0: 40}, CPU % 0),
                ClonePlacement(1, 'clone_1', '/device:CPU:1', {CPU % 0: 3, CPU % 1: 37},
                               CPU % 1))
  run = dict(model_name='lenet', dataset_name='digits', dataset_split_name='train',
             batch_size=32, num_clones=2, clone_on_cpu=True, variable_update='parameter_server',
             gradient_repacking=None, cpu_cores=2, doctor_rounds=3, doctor_steps=10,
             doctor_warmup_steps=5)
  run.update(run_changes)
  verdict = verdicts.decide(measurements, 2, shared={}, clone_on_cpu=True)
  return Diagnosis(run, VisibleDevices((), ((CPU % 0, 'CPU'), (CPU % 1, 'CPU'))),
                   measurements, placements, verdict)


def test_the_text_holds_devices_placement_table_and_verdict():
  text = report.format_text(_diagnosis())
  assert 'physical GPUs: none; the session\'s devices: /device:CPU:0, /device:CPU:1' in text
  assert 'clone 1: asked /device:CPU:1, ran on /device:CPU:1 (37 of 40 ops)' in text
  rows = {line[:22].strip(): line.split() for line in text.splitlines()
          if line.startswith(('input', 'model', 'full'))}
  assert rows['input pipeline alone'][-1] == '11.90x'   # 5000 / 420, the model at N = 2
  # The spread is half the rounds' range over their median: (480 - 380) / 2 / 420.
  assert 'model, synthetic data 2 420.0 +-12% 0.1524 1.05x' in ' '.join(text.split())
  assert 'Timing: 3 rounds of 10 steps per component after 5 warm-up steps' in text
  assert 'Verdict: clone overhead' in text and 'Change: --num_clones' in text
  assert all(line == line.rstrip() for line in text.splitlines())


def test_the_text_says_which_variable_update_ran_and_the_repacking_when_replicated():
  lines = report.format_text(_diagnosis()).splitlines()
  assert lines[1] == ('Variable update: parameter_server (one copy of the variables, the '
                      'clones\' gradients summed on one device)')
  lines = report.format_text(_diagnosis(variable_update='replicated',
                                        gradient_repacking=3)).splitlines()
  assert lines[1] == ('Variable update: replicated (a copy of the variables per clone, the '
                      'gradients all-reduced in 3 pack(s): --gradient_repacking=3)')


def test_write_gives_text_json_and_a_png_of_the_plot(tmp_path):
  diagnosis = _diagnosis()
  paths = report.write(diagnosis, str(tmp_path))
  assert [os.path.basename(p) for p in paths] == ['doctor.txt', 'doctor.json', 'doctor.png']
  with open(paths[0]) as handle:
    assert handle.read() == report.format_text(diagnosis)
  with open(paths[1]) as handle:
    data = json.load(handle)
  assert data['verdict']['name'] == 'clone overhead'
  assert data['run']['variable_update'] == 'parameter_server'
  assert [m['examples_per_sec'] for m in data['measurements']] == [5000.0, 400.0, 420.0, 410.0]
  assert data['placement'][1]['ops_by_device'] == {CPU % 0: 3, CPU % 1: 37}
  with open(paths[2], 'rb') as handle:
    assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
  with Image.open(paths[2]) as image:
    image.verify()
  with Image.open(paths[2]) as image:
    assert image.format == 'PNG' and image.size == (640, 420)


def test_an_out_of_memory_count_is_shown_and_plotted(tmp_path):
  diagnosis = _diagnosis(failed_at_two=True)
  assert 'out of memory (ResourceExhaustedError)' in report.format_text(diagnosis)
  report.plot(diagnosis, str(tmp_path / 'plot.png'))
  with Image.open(str(tmp_path / 'plot.png')) as image:
    image.verify()
