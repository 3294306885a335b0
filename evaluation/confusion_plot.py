"""The confusion matrix drawn for a reader: class names on both axes, readable at 101 classes.

    png, height, width = confusion_png(confusion, class_names, title='rgb, step 900')

Rows are the true classes and columns the predicted ones, in label order. A cell's colour
is its share of the row (the examples of that true class): white 0, dark blue 1, so the
diagonal is each class's accuracy whatever the class sizes. The number in a cell is the
count of examples; empty cells stay blank. At most `_MAX_COUNTS` numbers are written (a
text costs about a millisecond to draw): every diagonal cell, then the largest confusions;
a near-random model at 101 classes leaves some single confusions with their colour only. The figure grows with the class count (a cell
keeps at least `_MIN_CELL_INCHES`, the names their full length up to `_MAX_NAME_CHARS`),
so at 101 classes it is a large PNG meant to be zoomed, not shrunk to a screen.

Drawn with matplotlib's object API on the Agg canvas: no pyplot, no display, no global
figure registry, so it runs headless and in threads.
"""

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ['confusion_figure', 'confusion_png', 'figure_layout', 'written_cells', 'DPI']

DPI = 100
_MAX_CELL_INCHES = 1.0
_MIN_CELL_INCHES = 0.22
_MATRIX_INCHES = 6.0          # the matrix side for small class counts, cells allowing
_MAX_NAME_CHARS = 36          # longer names lose their middle to an ellipsis
_CHAR_WIDTH = 0.56            # average glyph width of DejaVu Sans, in em
_COLOUR_BAR_INCHES = 1.3
_TITLE_INCHES = 0.7
_PAD_INCHES = 0.3
_DARK_SHARE = 0.5             # cells darker than this get white text
_MAX_COUNTS = 1000


def _short(name):
  if len(name) <= _MAX_NAME_CHARS:
    return name
  keep = _MAX_NAME_CHARS - 1
  return name[:(keep + 1) // 2] + '\u2026' + name[len(name) - keep // 2:]


def _text_inches(text, points):
  return len(text) * points * _CHAR_WIDTH / 72


def figure_layout(num_classes, class_names, title=''):
  """Sizes for a matrix of `num_classes`: a dict of inches and points.

  cell: side of a cell (inches); label_pt, count_pt: font sizes of the class names and of
  the counts; names: the inches the longest (shortened) name takes; width, height: the
  figure's inches (wide enough for the title).
  """
  cell = float(np.clip(_MATRIX_INCHES / max(num_classes, 1), _MIN_CELL_INCHES,
                       _MAX_CELL_INCHES))
  cell_pt = cell * 72
  label_pt = float(np.clip(cell_pt * 0.55, 7, 11))
  count_pt = float(np.clip(cell_pt * 0.4, 5, 10))
  longest = max([_text_inches(_short(n), label_pt) for n in class_names] + [0.1])
  names = longest + 0.5   # + the axis label
  matrix = cell * num_classes
  width = _PAD_INCHES + names + matrix + _COLOUR_BAR_INCHES
  return {'cell': cell, 'label_pt': label_pt, 'count_pt': count_pt, 'names': names,
          'width': max(width, _text_inches(title, label_pt + 3) + 2 * _PAD_INCHES),
          'height': _TITLE_INCHES + matrix + names + _PAD_INCHES}


def _axes(figure, layout, num_classes):
  """The matrix axes and the colour bar's, placed in inches (fractions of the figure)."""
  width, height = layout['width'], layout['height']
  matrix = layout['cell'] * num_classes
  left = _PAD_INCHES + layout['names']
  bottom = layout['names'] + _PAD_INCHES
  axes = figure.add_axes([left / width, bottom / height, matrix / width, matrix / height])
  bar = figure.add_axes([(left + matrix + 0.15) / width, bottom / height, 0.18 / width,
                         matrix / height])
  return axes, bar


def _label(axes, layout, names):
  positions = np.arange(len(names))
  shown = [_short(name) for name in names]
  axes.set_xticks(positions)
  axes.set_xticklabels(shown, rotation=90, fontsize=layout['label_pt'])
  axes.set_yticks(positions)
  axes.set_yticklabels(shown, fontsize=layout['label_pt'])
  axes.set_xlabel('predicted class', fontsize=layout['label_pt'] + 2)
  axes.set_ylabel('true class', fontsize=layout['label_pt'] + 2)
  axes.tick_params(length=2)
  # Cell borders as two line collections: minor ticks would cost a Tick object each.
  edges = np.arange(len(names) + 1) - 0.5
  axes.hlines(edges, -0.5, len(names) - 0.5, colors='0.85', linewidth=0.4)
  axes.vlines(edges, -0.5, len(names) - 0.5, colors='0.85', linewidth=0.4)


def written_cells(counts, limit=_MAX_COUNTS):
  """(rows, columns) of the cells whose count is written: the non-zero ones, or when
  there are more than `limit`, the diagonal and the largest others (ties: first in row
  order)."""
  rows, columns = np.nonzero(counts)
  if len(rows) <= limit:
    return rows, columns
  diagonal = rows == columns
  others = np.flatnonzero(~diagonal)
  order = np.argsort(-counts[rows[others], columns[others]], kind='stable')
  keep = np.concatenate([np.flatnonzero(diagonal),
                         others[order[:max(limit - int(diagonal.sum()), 0)]]])
  return rows[keep], columns[keep]


def _counts(axes, layout, counts, share):
  for row, column in zip(*written_cells(counts)):
    axes.text(column, row, str(counts[row, column]), ha='center', va='center',
              fontsize=layout['count_pt'],
              color='white' if share[row, column] > _DARK_SHARE else 'black')


def confusion_figure(confusion, class_names, title=''):
  """The confusion matrix as a matplotlib Figure on an Agg canvas.

  Args:
    confusion: int [C, C], confusion[true, predicted] counts.
    class_names: C strings, in label order (an empty one is shown as its label).
    title: a line above the matrix.
  """
  counts = np.asarray(confusion, np.int64)
  num_classes = len(counts)
  names = [name or str(label) for label, name in enumerate(class_names)]
  share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
  layout = figure_layout(num_classes, names, title)
  figure = Figure(figsize=(layout['width'], layout['height']), dpi=DPI)
  FigureCanvasAgg(figure)
  axes, bar = _axes(figure, layout, num_classes)
  image = axes.imshow(share, cmap='Blues', vmin=0.0, vmax=1.0, interpolation='nearest',
                      aspect='auto')
  _label(axes, layout, names)
  _counts(axes, layout, counts, share)
  colour_bar = figure.colorbar(image, cax=bar)
  colour_bar.set_label('share of the true class', fontsize=layout['label_pt'])
  colour_bar.ax.tick_params(labelsize=layout['label_pt'])
  if title:
    figure.suptitle(title, fontsize=layout['label_pt'] + 3,
                    y=1 - 0.25 / layout['height'], va='top')
  return figure


def confusion_png(confusion, class_names, title=''):
  """The confusion matrix (see confusion_figure) as a PNG.

  Returns:
    (PNG bytes, height in pixels, width in pixels).
  """
  figure = confusion_figure(confusion, class_names, title)
  buffer = io.BytesIO()
  figure.canvas.print_png(buffer)
  width, height = figure.canvas.get_width_height()
  return buffer.getvalue(), height, width
