"""Tests for core/params.py: frozen config dataclasses <-> absl flags.

Every test defines the flags on its own fresh `flags.FlagValues()`, so the process-wide
`absl.flags.FLAGS` is never touched (parse_flags reads `flags.FLAGS`, which is
monkeypatched to a fresh FlagValues for those tests).
"""

import dataclasses
import typing

import pytest
from absl import flags

from core import params
from training.config import TrainConfig
from core.params import (ConfigError, config_from_argv, config_from_flags, define_flags,
                         parse_flags)

FIELDS = {field.name: field for field in dataclasses.fields(TrainConfig)}


def fresh_flags(config_class=TrainConfig):
  flag_values = flags.FlagValues()
  define_flags(config_class, flag_values)
  return flag_values


def parsed(argv, config_class=TrainConfig):
  """Parses argv (argv[0] is the program) on fresh flags; returns (config, leftover argv)."""
  flag_values = fresh_flags(config_class)
  rest = flag_values(argv)
  return config_from_flags(config_class, flag_values), rest


# --------------------------------------------------------------------------------------
# define_flags


def test_one_flag_per_field_and_nothing_else():
  flag_values = fresh_flags()
  assert set(flag_values) == set(FIELDS)
  assert len(FIELDS) > 50  # the whole of slim's train_image_classifier flag set


def test_every_flag_default_equals_the_field_default():
  flag_values = fresh_flags()
  for name, field in FIELDS.items():
    default = flag_values[name].default
    if isinstance(field.default, tuple):
      # A list flag holds a list of strings (None when the tuple is empty).
      assert default in (None, [str(v) for v in field.default]), name
    else:
      assert default == field.default, name
      assert type(default) is type(field.default), name  # 1 is not 1.0, 0 is not False


def test_help_text_comes_from_the_field():
  flag_values = fresh_flags()
  for name, field in FIELDS.items():
    assert flag_values[name].help.startswith(field.metadata['help']), name


@pytest.mark.parametrize('name, flag_type, default', [
    ('master', 'string', ''),
    ('train_dir', 'string', None),             # Optional[str]
    ('num_clones', 'int', 1),
    ('batch_size', 'int', 32),
    ('max_number_of_steps', 'int', None),      # Optional[int]
    ('learning_rate', 'float', 0.01),
    ('end_learning_rate', 'float', 0.0001),
    ('weight_decay', 'float', None),           # Optional[float]
    ('moving_average_decay', 'float', None),
    ('clone_on_cpu', 'bool', False),
    ('gpu_allow_growth', 'bool', True),
    ('use_batch_norm', 'bool', None),          # Optional[bool]
    ('optimizer', 'string', 'rmsprop'),
    ('learning_rate_decay_type', 'string', 'exponential'),
])
def test_flag_types_and_defaults(name, flag_type, default):
  flag = fresh_flags()[name]
  assert flag.flag_type() == flag_type
  assert flag.default == default
  assert flag.value == default


# train_image_classifier's defaults (shared/reference/model_deploy.md); weight_decay,
# dataset_name and model_name differ on purpose (see training/config.py).
SLIM_DEFAULTS = dict(
    master='', num_clones=1, clone_on_cpu=False, worker_replicas=1, num_ps_tasks=0,
    num_readers=4, num_preprocessing_threads=4, log_every_n_steps=10,
    save_summaries_secs=600, save_interval_secs=600, task=0, optimizer='rmsprop',
    momentum=0.9, adam_beta1=0.9, adam_beta2=0.999, opt_epsilon=1.0, rmsprop_decay=0.9,
    rmsprop_momentum=0.9, learning_rate_decay_type='exponential', learning_rate=0.01,
    end_learning_rate=0.0001, learning_rate_decay_factor=0.94, num_epochs_per_decay=2.0,
    label_smoothing=0.0, sync_replicas=False, replicas_to_aggregate=1,
    moving_average_decay=None, dataset_split_name='train', labels_offset=0,
    preprocessing_name=None, batch_size=32, train_image_size=None,
    max_number_of_steps=None, checkpoint_path=None, ignore_missing_vars=False,
    weight_decay=None, dataset_name=None, model_name=None)


def test_defaults_are_slims():
  flag_values = fresh_flags()
  for name, default in SLIM_DEFAULTS.items():
    assert flag_values[name].default == default, name


@pytest.mark.parametrize('name', ['learning_rate_boundaries', 'learning_rate_values',
                                  'checkpoint_exclude_scopes', 'trainable_scopes'])
def test_tuple_fields_become_list_flags(name):
  flag = fresh_flags()[name]
  assert isinstance(flag.parser, flags.ListParser)
  assert flag.default is None


def test_define_flags_twice_on_the_same_flag_values_raises():
  flag_values = fresh_flags()
  with pytest.raises(flags.DuplicateFlagError):
    define_flags(TrainConfig, flag_values)


def test_unsupported_field_type_is_refused():
  @dataclasses.dataclass(frozen=True)
  class Bad:
    mapping: typing.Dict[str, int] = params.param(None, 'not a flag type')

  with pytest.raises(TypeError, match='mapping'):
    define_flags(Bad, flags.FlagValues())


# --------------------------------------------------------------------------------------
# config_from_flags


def test_no_flags_gives_the_default_config():
  config, rest = parsed(['prog'])
  assert config == TrainConfig()
  assert rest == ['prog']
  assert config.learning_rate_boundaries == () and config.trainable_scopes == ()


def test_parsed_values_are_typed():
  config, _ = parsed(['prog', '--num_clones=2', '--learning_rate_boundaries=100,200',
                      '--learning_rate_values=0.1,0.01,0.001', '--clone_on_cpu'])
  assert config.num_clones == 2 and type(config.num_clones) is int
  assert config.clone_on_cpu is True
  assert config.learning_rate_boundaries == (100, 200)
  assert all(type(b) is int for b in config.learning_rate_boundaries)
  assert config.learning_rate_values == (0.1, 0.01, 0.001)
  assert all(type(v) is float for v in config.learning_rate_values)
  # Everything else keeps its default.
  assert config == dataclasses.replace(
      TrainConfig(), num_clones=2, clone_on_cpu=True, learning_rate_boundaries=(100, 200),
      learning_rate_values=(0.1, 0.01, 0.001))


def test_optional_and_string_list_values():
  config, _ = parsed(['prog', '--weight_decay=1e-4', '--moving_average_decay=0.999',
                      '--max_number_of_steps=7', '--nouse_batch_norm', '--train_dir=/t',
                      '--checkpoint_exclude_scopes=LeNet/fc4,LeNet/fc3',
                      '--trainable_scopes=LeNet/fc4', '--nogpu_allow_growth'])
  assert config.weight_decay == 1e-4 and type(config.weight_decay) is float
  assert config.moving_average_decay == 0.999
  assert config.max_number_of_steps == 7
  assert config.use_batch_norm is False
  assert config.gpu_allow_growth is False
  assert config.train_dir == '/t'
  assert config.checkpoint_exclude_scopes == ('LeNet/fc4', 'LeNet/fc3')
  assert config.trainable_scopes == ('LeNet/fc4',)


def test_leftover_positional_arguments_are_returned():
  _, rest = parsed(['prog', '--num_clones=3', 'extra'])
  assert rest == ['prog', 'extra']


@pytest.mark.parametrize('argv, flag', [
    (['--learning_rate_boundaries=100,2x0'], 'learning_rate_boundaries'),
    (['--learning_rate_boundaries=1.5'], 'learning_rate_boundaries'),
    (['--learning_rate_boundaries=100,'], 'learning_rate_boundaries'),
    (['--learning_rate_values=0.1,abc'], 'learning_rate_values'),
])
def test_non_numeric_list_item_raises_config_error_naming_the_flag(argv, flag):
  flag_values = fresh_flags()
  flag_values(['prog'] + argv)
  with pytest.raises(ConfigError) as error:
    config_from_flags(TrainConfig, flag_values)
  assert '--%s' % flag in str(error.value)
  assert '\n' not in str(error.value)
  assert isinstance(error.value, ValueError)


def test_flagfile(tmp_path):
  flagfile = tmp_path / 'recipe.cfg'
  flagfile.write_text('# a recipe\n'
                      '--dataset_name=digits\n'
                      '--num_clones=2\n'
                      '--clone_on_cpu\n'
                      '--learning_rate_decay_type=piecewise\n'
                      '--learning_rate_boundaries=10,20\n'
                      '--learning_rate_values=0.5,0.25,0.125\n'
                      '--batch_size=16\n')
  config, _ = parsed(['prog', '--flagfile=%s' % flagfile, '--batch_size=8'])
  assert config.dataset_name == 'digits'
  assert config.num_clones == 2 and config.clone_on_cpu is True
  assert config.learning_rate_decay_type == 'piecewise'
  assert config.learning_rate_boundaries == (10, 20)
  assert config.learning_rate_values == (0.5, 0.25, 0.125)
  assert config.batch_size == 8  # a later command-line flag overrides the file


def test_shipped_demo_recipe_parses():
  config, _ = parsed(['prog', '--flagfile=configs/digits_lenet_2xcpu.cfg'])
  assert (config.dataset_name, config.model_name) == ('digits', 'lenet')
  assert config.num_clones == 2 and config.clone_on_cpu is True
  assert config.optimizer == 'momentum' and config.learning_rate == 0.02
  assert config.learning_rate_decay_type == 'cosine'
  assert config.max_number_of_steps == 600 and config.warmup_epochs == 1.0


def test_config_is_frozen():
  config, _ = parsed(['prog', '--num_clones=2'])
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.num_clones = 3
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.learning_rate = 1.0
  assert config.num_clones == 2


def test_eval_config_round_trip():
  from evaluation.image_eval import EvalConfig  # pylint: disable=import-outside-toplevel
  config, _ = parsed(['prog'], EvalConfig)
  assert config == EvalConfig()
  config, _ = parsed(['prog', '--batch_size=7', '--min_accuracy=0.5'], EvalConfig)
  assert config.batch_size == 7 and config.min_accuracy == 0.5
  assert config.dataset_split_name == 'test'


# --------------------------------------------------------------------------------------
# parse_flags: absl's flags_parser for app.run


@pytest.fixture
def global_flags(monkeypatch):
  """flags.FLAGS replaced by a fresh FlagValues holding TrainConfig's flags."""
  flag_values = fresh_flags()
  monkeypatch.setattr(flags, 'FLAGS', flag_values)
  return flag_values


@pytest.mark.parametrize('argv, expected', [
    (['--num_clone=2'], 'num_clone'),                    # unknown flag
    (['--batch_size=abc'], 'batch_size'),                # not an integer
    (['--batch_size=1.5'], 'batch_size'),
    (['--learning_rate=fast'], 'learning_rate'),         # not a float
    (['--clone_on_cpu=maybe'], 'clone_on_cpu'),          # not a bool
    (['--num_clones'], 'num_clones'),                    # missing value
    (['--flagfile=/nonexistent/recipe.cfg'], 'recipe.cfg'),
])
def test_parse_flags_prints_one_error_line_and_exits_2(global_flags, capsys, argv,
                                                       expected):
  with pytest.raises(SystemExit) as exit_info:
    parse_flags(['prog'] + argv)
  assert exit_info.value.code == 2
  out, err = capsys.readouterr()
  assert out == ''
  lines = err.splitlines()
  assert len(lines) == 1, err
  assert lines[0].startswith('error: ')
  assert expected in lines[0]
  assert 'Traceback' not in err


def test_parse_flags_returns_leftover_argv(global_flags, capsys):
  assert parse_flags(['prog', '--num_clones=4', 'positional']) == ['prog', 'positional']
  assert global_flags.num_clones == 4
  assert capsys.readouterr() == ('', '')


def one_error_line(capsys, argv):
  with pytest.raises(SystemExit) as exit_info:
    parse_flags(['prog'] + argv)
  assert exit_info.value.code == 2
  out, err = capsys.readouterr()
  assert out == '' and len(err.splitlines()) == 1, err
  return err.rstrip('\n')


def test_a_flagfile_that_cannot_be_read_is_named_with_what_is_beside_it(
    global_flags, capsys, tmp_path, monkeypatch):
  """`--flagfile=configs/nope.cfg`: the line names the file, relative to where it is
  read from, and a file of a like name there; nested, also the line that named it."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / 'configs').mkdir()
  (tmp_path / 'configs' / 'lenet_digits.cfg').write_text('--num_clones=2\n')
  assert one_error_line(capsys, ['--flagfile=configs/lenet_digit.cfg']) == (
      'error: --flagfile=configs/lenet_digit.cfg cannot be read: No such file or directory '
      '(similar: configs/lenet_digits.cfg; a relative path is read from the current '
      'directory, %s)' % tmp_path)
  (tmp_path / 'outer.cfg').write_text('# a recipe\n--flagfile=configs/nope.cfg\n')
  assert one_error_line(capsys, ['--flagfile', 'outer.cfg']) == (
      'error: flagfile outer.cfg line 2: --flagfile=configs/nope.cfg cannot be read: No such '
      'file or directory (the nearest directory that exists is configs; a relative path is '
      'read from the current directory, %s)' % tmp_path)


def test_a_bad_flag_in_a_flagfile_names_the_flagfile_and_line(global_flags, capsys,
                                                             tmp_path):
  inner, outer = tmp_path / 'inner.cfg', tmp_path / 'outer.cfg'
  inner.write_text('--num_clones=2\n\n// absl comment\n--num_clone=3\n')
  outer.write_text('--batch_size=8\n--flagfile=%s\n' % inner)
  assert one_error_line(capsys, ['--flagfile=%s' % outer]).startswith(
      "error: flagfile %s line 4 (in %s line 2): --num_clone=3: Unknown command line flag "
      "'num_clone'" % (inner, outer))
  inner.write_text('--batch_size=abc\n')
  assert one_error_line(capsys, ['--batch_size=4', '--flagfile=%s' % inner]) == (
      "error: flagfile %s line 1: flag --batch_size=abc: invalid literal for int() with "
      "base 10: 'abc'" % inner)
  # A good value in the flagfile, the bad one on the command line: absl's line, as it was.
  inner.write_text('--batch_size=8\n')
  assert one_error_line(capsys, ['--flagfile=%s' % inner, '--batch_size=xyz']) == (
      "error: flag --batch_size=xyz: invalid literal for int() with base 10: 'xyz'")


# --------------------------------------------------------------------------------------
# config_from_argv: the entry's reading, on flags of its own


def test_config_from_argv_reads_as_the_entry_does(global_flags, capsys, tmp_path):
  recipe = tmp_path / 'recipe.cfg'
  recipe.write_text('--batch_size=8\n--num_clones=2\n')
  config, given = config_from_argv(TrainConfig, ['--flagfile=%s' % recipe, '--num_clones=4',
                                                 '--clone_on_cpu'])
  assert (config.batch_size, config.num_clones, config.clone_on_cpu) == (8, 4, True)
  assert given == {'batch_size', 'num_clones', 'clone_on_cpu'}
  assert config_from_argv(TrainConfig, [])[0] == TrainConfig()
  # The same one line as the entry prints (parse_flags), raised instead.
  inner = tmp_path / 'inner.cfg'
  inner.write_text('--batch_size=abc\n')
  with pytest.raises(ConfigError) as raised:
    config_from_argv(TrainConfig, ['--flagfile=%s' % inner])
  assert 'error: ' + str(raised.value) == one_error_line(capsys, ['--flagfile=%s' % inner])
  with pytest.raises(ConfigError, match=r"unexpected arguments \['extra'\]"):
    config_from_argv(TrainConfig, ['--batch_size=4', 'extra'])
