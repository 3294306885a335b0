"""The doctor's output: the text table with devices, placement and verdict (printed and
written as doctor.txt), the same as JSON (doctor.json), and the plot (doctor.png):
examples/sec against the clone count for each component.

The plot is drawn on a matplotlib `Figure` of its own with the Agg canvas, never through
pyplot: no display needed, no global figure state.
"""

import dataclasses
import json
import os
import statistics

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from deployment.trace.placement import describe_placement, short_device
from training.doctor.measure import FULL, INPUT, SYNTHETIC

__all__ = ['TEXT_FILE', 'JSON_FILE', 'PLOT_FILE', 'variable_update_line', 'format_text',
           'to_json', 'plot', 'write']

TEXT_FILE, JSON_FILE, PLOT_FILE = 'doctor.txt', 'doctor.json', 'doctor.png'
_ROW = '%-22s %6s %13s %7s %10s %11s %13s'


def _rate(measurement):
  return measurement.examples_per_sec if measurement else None


def _synthetic(measurements):
  return {m.num_clones: m for m in measurements if m.component == SYNTHETIC}


def _ratio(value, reference):
  if value is None or not reference:
    return ''
  return '%.2fx' % (value / reference)


def _spread(rates):
  """Half the range of the rounds' rates, in percent of their median: the machine's noise."""
  if len(rates) < 2:
    return ''
  return '+-%d%%' % round(50 * (max(rates) - min(rates)) / statistics.median(rates))


def _table(diagnosis):
  """The rows: component, clones, examples/sec (median of the rounds), its spread over the
  rounds, sec/step, vs 1 clone (synthetic rows), vs the model step at N clones (input and
  full rows)."""
  synthetic = _synthetic(diagnosis.measurements)
  one = _rate(synthetic.get(1))
  model = _rate(synthetic.get(diagnosis.run['num_clones']))
  lines = [_ROW % ('component', 'clones', 'examples/sec', 'spread', 'sec/step',
                   'vs 1 clone', 'vs model at N')]
  for m in diagnosis.measurements:
    rate = m.error or '%.1f' % m.examples_per_sec
    seconds = '' if m.seconds_per_step is None else '%.4f' % m.seconds_per_step
    lines.append(_ROW % (
        m.component, '-' if m.num_clones is None else m.num_clones, rate,
        _spread(m.round_rates) if m.examples_per_sec is not None else '', seconds,
        _ratio(m.examples_per_sec, one) if m.component == SYNTHETIC else '',
        _ratio(m.examples_per_sec, model) if m.component != SYNTHETIC else ''))
  return [line.rstrip() for line in lines]


def _devices(diagnosis):
  devices = diagnosis.devices
  gpus = ', '.join(devices.physical_gpus) or 'none'
  logical = ', '.join(short_device(name) for name, _ in devices.logical)
  return ['Devices: physical GPUs: %s; the session\'s devices: %s; %s CPU cores'
          % (gpus, logical, diagnosis.run['cpu_cores'])]


def _input_wait(measurements):
  """The full step's input wait, as the trainer's progress lines measure it."""
  return ['Input wait of the full training step: %.0f%% of its time (what the progress '
          'lines show as input wait; docs/monitoring.md)' % (100 * m.input_wait_share)
          for m in measurements if m.component == FULL and m.input_wait_share is not None]


def variable_update_line(run):
  """Which variable update every step ran (--variable_update), with the repacking when
  replicated."""
  if run['variable_update'] == 'replicated':
    return ('Variable update: replicated (a copy of the variables per clone, the gradients '
            'all-reduced in %d pack(s): --gradient_repacking=%d)'
            % (run['gradient_repacking'], run['gradient_repacking']))
  return ('Variable update: %s (one copy of the variables, the clones\' gradients summed '
          'on one device)' % run['variable_update'])


def format_text(diagnosis):
  """The report as printed: header, variable update, devices, placement, table, verdict."""
  run = diagnosis.run
  lines = ['Doctor: %s on %s/%s, batch %d per clone, %d clone(s) %s' % (
      run['model_name'], run['dataset_name'], run['dataset_split_name'], run['batch_size'],
      run['num_clones'],
      'on logical CPU devices (--clone_on_cpu)' if run['clone_on_cpu'] else 'on GPUs'),
           variable_update_line(run),
           'Timing: %d rounds of %d steps per component after %d warm-up steps; medians '
           'over the rounds' % (run['doctor_rounds'], run['doctor_steps'],
                                run['doctor_warmup_steps'])]
  lines += _devices(diagnosis)
  lines.append('Placement (traced full step):')
  lines += ['  ' + line for line in describe_placement(diagnosis.placements)
            or ['not traced: the full step failed']]
  lines += [''] + _table(diagnosis) + _input_wait(diagnosis.measurements) + ['']
  verdict = diagnosis.verdict
  lines += ['Verdict: %s' % verdict.name, '  ' + verdict.reason,
            'Change: %s' % ' '.join(verdict.flags), '  ' + verdict.advice]
  return '\n'.join(lines) + '\n'


def to_json(diagnosis):
  """The diagnosis as a JSON-ready dict (devices in full names)."""
  return {'run': diagnosis.run,
          'devices': dataclasses.asdict(diagnosis.devices),
          'measurements': [dataclasses.asdict(m) for m in diagnosis.measurements],
          'placement': [dataclasses.asdict(p) for p in diagnosis.placements],
          'verdict': dataclasses.asdict(diagnosis.verdict)}


def _error_bars(measurements):
  """(x, median, [below], [above]) of the measurements, the bars spanning their rounds."""
  done = [m for m in measurements if m.examples_per_sec is not None]
  rates = [m.examples_per_sec for m in done]
  below = [rate - min(m.round_rates or (rate,)) for m, rate in zip(done, rates)]
  above = [max(m.round_rates or (rate,)) - rate for m, rate in zip(done, rates)]
  return [m.num_clones for m in done], rates, [below, above]


def _draw(axes, measurements):
  """The components on `axes`; returns every rate drawn (for the scale)."""
  synthetic = [m for _, m in sorted(_synthetic(measurements).items())]
  x, rates, bars = _error_bars(synthetic)
  drawn = list(rates)
  if x:
    axes.errorbar(x, rates, yerr=bars, fmt='o-', capsize=4, label=SYNTHETIC)
  full = [m for m in measurements if m.component == FULL]
  x, rates, bars = _error_bars(full)
  if x:  # Beside the synthetic point of the same count, not on it.
    axes.errorbar([n + 0.08 for n in x], rates, yerr=bars, fmt='s', color='tab:red',
                  markersize=8, capsize=4, label=FULL)
    drawn += rates
  for m in measurements:
    if m.component == INPUT and m.examples_per_sec is not None:
      axes.axhline(m.examples_per_sec, linestyle='--', color='tab:green', label=INPUT)
      axes.axhspan(min(m.round_rates or (m.examples_per_sec,)),
                   max(m.round_rates or (m.examples_per_sec,)), color='tab:green', alpha=0.12)
      drawn.append(m.examples_per_sec)
  failed = [m.num_clones for m in synthetic + full if m.error]
  if failed:  # At the foot of the plot, whatever the scale.
    axes.plot(failed, [0.03] * len(failed), 'x', color='black', markersize=10,
              transform=axes.get_xaxis_transform(), label='out of memory')
  return drawn


def plot(diagnosis, path):
  """Writes the PNG: examples/sec against clones, the synthetic step as a line, the full
  step as a square, the input alone as a dashed line; bars and band span the rounds.
  The scale is logarithmic when the rates differ more than tenfold."""
  num_clones = diagnosis.run['num_clones']
  figure = Figure(figsize=(6.4, 4.2), dpi=100)
  FigureCanvasAgg(figure)
  axes = figure.add_subplot(1, 1, 1)
  drawn = _draw(axes, diagnosis.measurements)
  logarithmic = bool(drawn) and min(drawn) > 0 and max(drawn) > 10 * min(drawn)
  if logarithmic:
    axes.set_yscale('log')
  else:
    axes.set_ylim(bottom=0)
  axes.set_xticks(range(1, num_clones + 1))
  axes.set_xlim(0.5, num_clones + 0.5)
  axes.set_xlabel('clones')
  axes.set_ylabel('examples/sec' + (' (log scale)' if logarithmic else ''))
  axes.set_title('%s on %s: %s' % (diagnosis.run['model_name'],
                                   diagnosis.run['dataset_name'], diagnosis.verdict.name))
  axes.grid(True, which='both', alpha=0.3)
  axes.legend(loc='best', fontsize='small')
  figure.tight_layout()
  figure.savefig(path, format='png')


def write(diagnosis, directory):
  """Writes doctor.txt, doctor.json and doctor.png into `directory`; returns the paths."""
  paths = [os.path.join(directory, name) for name in (TEXT_FILE, JSON_FILE, PLOT_FILE)]
  with open(paths[0], 'w') as handle:
    handle.write(format_text(diagnosis))
  with open(paths[1], 'w') as handle:
    json.dump(to_json(diagnosis), handle, indent=2, sort_keys=True)
    handle.write('\n')
  plot(diagnosis, paths[2])
  return paths
