"""evaluation.confusion_plot: class names on both axes, colour by row share, counts in the
cells, and a figure that stays readable (and quick) at 101 classes."""

import io
import os
import subprocess
import sys
import time

import matplotlib
import numpy as np
import pytest
from PIL import Image

from evaluation import confusion_plot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# UCF101's classes: the 101-class case the figure is sized for.
UCF101 = """ApplyEyeMakeup ApplyLipstick Archery BabyCrawling BalanceBeam BandMarching
BaseballPitch Basketball BasketballDunk BenchPress Biking Billiards BlowDryHair
BlowingCandles BodyWeightSquats Bowling BoxingPunchingBag BoxingSpeedBag BreastStroke
BrushingTeeth CleanAndJerk CliffDiving CricketBowling CricketShot CuttingInKitchen Diving
Drumming Fencing FieldHockeyPenalty FloorGymnastics FrisbeeCatch FrontCrawl GolfSwing
Haircut Hammering HammerThrow HandstandPushups HandstandWalking HeadMassage HighJump
HorseRace HorseRiding HulaHoop IceDancing JavelinThrow JugglingBalls JumpingJack JumpRope
Kayaking Knitting LongJump Lunges MilitaryParade Mixing MoppingFloor Nunchucks ParallelBars
PizzaTossing PlayingCello PlayingDaf PlayingDhol PlayingFlute PlayingGuitar PlayingPiano
PlayingSitar PlayingTabla PlayingViolin PoleVault PommelHorse PullUps Punch PushUps Rafting
RockClimbingIndoor RopeClimbing Rowing SalsaSpin ShavingBeard Shotput SkateBoarding Skiing
Skijet SkyDiving SoccerJuggling SoccerPenalty StillRings SumoWrestling Surfing Swing
TableTennisShot TaiChi TennisSwing ThrowDiscus TrampolineJumping Typing UnevenBars
VolleyballSpiking WalkingWithDog WallPushups WritingOnBoard YoYo""".split()


def _confusion(num_classes, per_class, right, seed=0):
  """Counts of `per_class` examples a class, `right` of them predicted right (mean)."""
  rng = np.random.RandomState(seed)
  labels = np.repeat(np.arange(num_classes), per_class)
  guesses = np.where(rng.rand(len(labels)) < right, labels,
                     rng.randint(0, num_classes, len(labels)))
  matrix = np.zeros((num_classes, num_classes), np.int64)
  np.add.at(matrix, (labels, guesses), 1)
  return matrix


def _png(confusion, names, title=''):
  data, height, width = confusion_plot.confusion_png(confusion, names, title)
  image = Image.open(io.BytesIO(data))
  assert image.format == 'PNG' and image.size == (width, height)
  return image.convert('RGB'), data


def _cell_pixel(layout, row, column, height_px):
  """A pixel near the top-left corner of cell (row, column), away from its count."""
  dpi, cell = confusion_plot.DPI, layout['cell']
  pad = confusion_plot._PAD_INCHES  # pylint: disable=protected-access
  x = (pad + layout['names'] + (column + 0.15) * cell) * dpi
  y = height_px - (layout['names'] + pad + (layout['num'] - row - 0.15) * cell) * dpi
  return int(x), int(y)


def test_101_classes_readable_size_and_quick():
  """UCF101's classes, 37 test videos each, a 70% model: each cell at least 22 pixels
  (0.22 in at 100 dpi), so the 8-pt names and the counts fit; drawn in under a few
  seconds of CPU (the process's own time: the machine may be busy)."""
  confusion = _confusion(101, 37, 0.7)
  names = UCF101
  started = time.process_time()
  image, data = _png(confusion, names, 'rgb, step 9000: top-1 70.0%')
  seconds = time.process_time() - started
  assert seconds < 5.0, seconds
  layout = confusion_plot.figure_layout(101, names)
  assert layout['cell'] * confusion_plot.DPI >= 22 and layout['label_pt'] >= 7
  width, height = image.size
  matrix = 101 * 22
  assert matrix < width < matrix + 800 and matrix < height < matrix + 800, image.size
  assert len(data) < 2_000_000


def test_draws_headless_without_pyplot():
  """No display, no MPLBACKEND: the Agg canvas draws, and pyplot (its global figures and
  backend choice) is never loaded."""
  script = ('import sys; from evaluation.confusion_plot import confusion_png; '
            'confusion_png([[1, 0], [0, 1]], ["a", "b"]); '
            'print("matplotlib.pyplot" in sys.modules)')
  env = {k: v for k, v in os.environ.items() if k not in ('DISPLAY', 'MPLBACKEND')}
  result = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(env, PYTHONPATH=ROOT))
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == 'False'


def test_every_class_name_is_on_both_axes_in_label_order():
  names = ['walk', 'run', '', 'jump']
  figure = confusion_plot.confusion_figure(np.eye(4, dtype=np.int64), names)
  axes = figure.axes[0]
  expected = ['walk', 'run', '2', 'jump']   # an empty name shows its label
  assert [t.get_text() for t in axes.get_xticklabels()] == expected
  assert [t.get_text() for t in axes.get_yticklabels()] == expected
  assert axes.get_xlabel() == 'predicted class' and axes.get_ylabel() == 'true class'


def test_counts_are_written_and_empty_cells_left_blank():
  confusion = np.array([[5, 0, 1], [0, 2, 0], [3, 0, 0]])
  figure = confusion_plot.confusion_figure(confusion, ['a', 'b', 'c'])
  texts = {(int(t.get_position()[1]), int(t.get_position()[0])): t.get_text()
           for t in figure.axes[0].texts}
  assert texts == {(0, 0): '5', (0, 2): '1', (1, 1): '2', (2, 0): '3'}


def test_colour_is_the_row_share_not_the_count():
  """1000 of 1000 right and 1 of 2 right: the first diagonal cell is dark, the second
  half as dark, although its count is 1000 times smaller; an empty cell is white."""
  confusion = np.array([[1000, 0], [1, 1]])
  image, _ = _png(confusion, ['big', 'small'])
  layout = dict(confusion_plot.figure_layout(2, ['big', 'small']), num=2)
  full = np.array(image.getpixel(_cell_pixel(layout, 0, 0, image.size[1])))
  half = np.array(image.getpixel(_cell_pixel(layout, 1, 1, image.size[1])))
  empty = np.array(image.getpixel(_cell_pixel(layout, 0, 1, image.size[1])))
  blues = matplotlib.colormaps['Blues']
  for pixel, share in ((full, 1.0), (half, 0.5), (empty, 0.0)):
    expected = np.round(np.array(blues(share)[:3]) * 255)
    assert np.abs(pixel - expected).max() <= 3, (share, pixel, expected)


def test_long_names_keep_both_ends_and_widen_the_margin():
  long_name = 'a_very_long_class_name_from_some_folder_dataset_of_actions'
  assert len(long_name) > 36
  figure = confusion_plot.confusion_figure(np.eye(2, dtype=np.int64), [long_name, 'b'])
  shown = figure.axes[0].get_yticklabels()[0].get_text()
  assert len(shown) == 36 and shown.startswith('a_very_long_class') and shown.endswith(
      '_of_actions') and '\u2026' in shown
  short = confusion_plot.figure_layout(2, ['a', 'b'])
  wide = confusion_plot.figure_layout(2, [long_name, 'b'])
  assert wide['names'] > short['names'] + 2 and wide['width'] > short['width'] + 2


@pytest.mark.parametrize('num_classes', [2, 10, 51, 101, 400])
def test_fonts_and_cells_scale_with_the_class_count(num_classes):
  layout = confusion_plot.figure_layout(num_classes, [str(i) for i in range(num_classes)])
  assert 0.22 <= layout['cell'] <= 1.0
  assert 7 <= layout['label_pt'] <= 11 and 5 <= layout['count_pt'] <= 10
  # A name at label_pt fits the height of its row (1 pt = 1/72 in).
  assert layout['label_pt'] / 72 <= layout['cell']


def test_written_cells_keep_the_diagonal_and_the_largest_confusions():
  confusion = np.array([[3, 1, 2], [0, 4, 5], [1, 1, 6]])
  rows, columns = confusion_plot.written_cells(confusion, limit=5)
  written = set(zip(rows.tolist(), columns.tolist()))
  assert written == {(0, 0), (1, 1), (2, 2), (1, 2), (0, 2)}
  rows, _ = confusion_plot.written_cells(confusion, limit=100)
  assert len(rows) == 8
