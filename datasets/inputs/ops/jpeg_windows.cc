// DecodeJpegWindows: one window cut from each JPEG frame of a clip, decoded straight into
// the op's output (datasets/inputs/jpeg_windows.py loads it; docs/benchmarks.md, issue 23).
//
// The pixels are tf.io.decode_jpeg's (libjpeg-turbo, accurate integer DCT, fancy
// upsampling) sliced to the window, byte for byte, and a frame decodes here exactly when
// it decodes there: every row is entropy-decoded up to the end of image (rows outside the
// window skip the inverse DCT), and data that ends early is an error, as TensorFlow's
// memory source makes it. Only the window's columns (plus a margin, so that chroma
// upsampling at the edges sees the same neighbours as a whole decode) are transformed.
//
// Build: `make jpeg-op` (g++ with tf.sysconfig's flags, -ljpeg).

#include <setjmp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace slimdeploy {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::tstring;
namespace errors = ::tensorflow::errors;
namespace shape_inference = ::tensorflow::shape_inference;

// A frame's status in the op's second output.
enum FrameStatus : int32_t {
  kDecoded = 0,   // the window holds the frame's pixels
  kFailed = 1,    // tf.io.decode_jpeg fails on it too: zeros
  kElsewhere = 2  // not for this op (another size, not a JPEG, CMYK): zeros, decode it with
                  // TensorFlow's ops
};

// Pixels decoded beyond each side of the window: fancy upsampling of 2x subsampled chroma
// gives a column or row at a cut edge other values than a whole decode would; 2 luma
// pixels (one chroma sample) away from the cut they are the same (tested).
constexpr int kMargin = 2;

// TensorFlow refuses output of 2^29 bytes or more (jpeg_mem.cc); its own op says so.
constexpr int64_t kMaxBytes = int64_t{1} << 29;

struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
};

void OnError(j_common_ptr cinfo) {
  longjmp(reinterpret_cast<ErrorManager*>(cinfo->err)->jump, 1);
}

void Silent(j_common_ptr) {}

// The memory source of TensorFlow's decoder (jpeg_handle.cc, without its recovery of
// truncated files): running out of data is an error, not libjpeg's fake end of image.
struct Source {
  jpeg_source_mgr pub;
  const JOCTET* data;
  size_t size;
};

void InitSource(j_decompress_ptr cinfo) {
  Source* source = reinterpret_cast<Source*>(cinfo->src);
  source->pub.next_input_byte = source->data;
  source->pub.bytes_in_buffer = source->size;
}

boolean FillInput(j_decompress_ptr cinfo) {
  Source* source = reinterpret_cast<Source*>(cinfo->src);
  if (source->pub.bytes_in_buffer == 0 && source->pub.next_input_byte == source->data) {
    ERREXIT(cinfo, JERR_INPUT_EMPTY);
  }
  if (source->pub.bytes_in_buffer > 0) return FALSE;  // as TensorFlow's: suspend
  ERREXIT(cinfo, JERR_FILE_READ);
  return FALSE;
}

void SkipInput(j_decompress_ptr cinfo, long count) {
  Source* source = reinterpret_cast<Source*>(cinfo->src);
  if (count <= 0) return;
  if (static_cast<size_t>(count) > source->pub.bytes_in_buffer) {
    source->pub.bytes_in_buffer = 0;
    FillInput(cinfo);
    return;
  }
  source->pub.next_input_byte += count;
  source->pub.bytes_in_buffer -= count;
}

void TermSource(j_decompress_ptr) {}

// A decompressor whose errors longjmp to `error.jump`, silently: each caller sets that
// (setjmp) itself before Open, and destroys `cinfo` when it lands there.
struct Decompressor {
  jpeg_decompress_struct cinfo;
  ErrorManager error;
  Source source;
};

void CatchErrors(Decompressor* decompressor) {
  decompressor->cinfo.err = jpeg_std_error(&decompressor->error.pub);
  decompressor->error.pub.error_exit = OnError;
  decompressor->error.pub.output_message = Silent;
}

void Open(Decompressor* decompressor, const tstring& jpeg) {
  j_decompress_ptr cinfo = &decompressor->cinfo;
  Source* source = &decompressor->source;
  jpeg_create_decompress(cinfo);
  source->pub.init_source = InitSource;
  source->pub.fill_input_buffer = FillInput;
  source->pub.skip_input_data = SkipInput;
  source->pub.resync_to_restart = jpeg_resync_to_restart;
  source->pub.term_source = TermSource;
  source->pub.bytes_in_buffer = 0;
  source->pub.next_input_byte = nullptr;
  source->data = reinterpret_cast<const JOCTET*>(jpeg.data());
  source->size = jpeg.size();
  cinfo->src = &source->pub;
}

// Where one window goes: rows of `size` pixels, each pixel `stride` bytes apart, this
// JPEG's `channels` bytes at its start (flow's two grey JPEGs share one pixel).
struct Window {
  int height, width, y, x, size, channels;
  uint8_t* out;
  int stride;
};

bool IsJpeg(const tstring& bytes) {
  // TensorFlow's decode_jpeg decodes PNG, GIF and BMP too, by these magic bytes.
  return bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF &&
         static_cast<uint8_t>(bytes[1]) == 0xD8 && static_cast<uint8_t>(bytes[2]) == 0xFF;
}

void CopyRow(const JSAMPLE* row, const Window& window, int out_row) {
  uint8_t* out = window.out + static_cast<int64_t>(out_row) * window.size * window.stride;
  if (window.channels == window.stride) {
    std::memcpy(out, row, static_cast<size_t>(window.size) * window.channels);
    return;
  }
  for (int column = 0; column < window.size; ++column) {
    std::memcpy(out + column * window.stride, row + column * window.channels,
                window.channels);
  }
}

// Reads the window's rows, then every later row up to the end of image without its
// inverse DCT (jpeg_skip_scanlines still decodes the entropy-coded data, which is where
// a damaged JPEG fails), then the end marker. `row` holds output_width pixels.
//
// The window's inner rows of pixels (not flow's interleaved u and v) are written by
// libjpeg straight into the output, with no copy through `row` (4/5 of the op's copying,
// docs/benchmarks.md): the row pointer starts `before` bytes ahead of the window's row,
// so the margin columns land in the tail of the row above (saved and put back) and in the
// head of the row below (written next). The first and last rows, whose margins would
// leave the frame, go through `row`.
void ReadRows(j_decompress_ptr cinfo, const Window& window, JDIMENSION left, JSAMPLE* row) {
  const int top = std::max(0, window.y - kMargin);
  if (top > 0) jpeg_skip_scanlines(cinfo, top);
  JSAMPLE saved[(16 + kMargin) * 3];  // 4:2:0's widening and the margin; wider: copied
  const int row_bytes = window.size * window.stride;
  const int before = (window.x - static_cast<int>(left)) * window.channels;
  const int after = static_cast<int>(cinfo->output_width) * window.channels - before - row_bytes;
  const bool in_place = window.channels == window.stride &&
                        before <= static_cast<int>(sizeof(saved)) && after <= row_bytes;
  JSAMPROW rows[1];
  while (cinfo->output_scanline < static_cast<JDIMENSION>(window.y + window.size)) {
    const int out_row = static_cast<int>(cinfo->output_scanline) - window.y;
    uint8_t* out = window.out + static_cast<int64_t>(out_row) * row_bytes;
    const bool direct = in_place && out_row > 0 && out_row < window.size - 1;
    rows[0] = direct ? out - before : row;
    if (direct) std::memcpy(saved, out - before, before);
    if (jpeg_read_scanlines(cinfo, rows, 1) != 1) ERREXIT(cinfo, JERR_FILE_READ);
    if (direct) {
      std::memcpy(out - before, saved, before);
    } else if (out_row >= 0) {
      CopyRow(row + before, window, out_row);
    }
  }
  rows[0] = row;
  const JDIMENSION last = cinfo->output_height - 1;
  if (cinfo->output_scanline < last) jpeg_skip_scanlines(cinfo, last - cinfo->output_scanline);
  if (cinfo->output_scanline == last && jpeg_read_scanlines(cinfo, rows, 1) != 1) {
    ERREXIT(cinfo, JERR_FILE_READ);
  }
  jpeg_finish_decompress(cinfo);
}

// Decodes `jpeg`'s window into window.out; `row` is scratch of at least width * channels
// bytes. Owns nothing a longjmp would leak: libjpeg's memory goes with the destroy.
FrameStatus DecodeWindow(const tstring& jpeg, const Window& window, JSAMPLE* row) {
  if (!IsJpeg(jpeg)) return kElsewhere;
  Decompressor decompressor;
  jpeg_decompress_struct& cinfo = decompressor.cinfo;
  CatchErrors(&decompressor);
  volatile FrameStatus status = kFailed;
  if (setjmp(decompressor.error.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return status;
  }
  Open(&decompressor, jpeg);
  jpeg_read_header(&cinfo, TRUE);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = window.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo.do_fancy_upsampling = TRUE;
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_calc_output_dimensions(&cinfo);
  const int64_t bytes = int64_t{cinfo.output_height} * cinfo.output_width * cinfo.num_components;
  if ((cmyk && window.channels == 3) || bytes >= kMaxBytes ||
      static_cast<int>(cinfo.output_height) != window.height ||
      static_cast<int>(cinfo.output_width) != window.width) {
    status = kElsewhere;  // TensorFlow's path decides (converted CMYK, its size limit)
    longjmp(decompressor.error.jump, 1);
  }
  jpeg_start_decompress(&cinfo);
  JDIMENSION left = std::max(0, window.x - kMargin);
  JDIMENSION width = std::min(window.width, window.x + window.size + kMargin) - left;
  if (width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &left, &width);
  ReadRows(&cinfo, window, left, row);
  jpeg_destroy_decompress(&cinfo);
  return kDecoded;
}

class DecodeJpegWindowsOp : public OpKernel {
 public:
  explicit DecodeJpegWindowsOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("size", &size_));
    OP_REQUIRES_OK(context, context->GetAttr("channels", &channels_));
    OP_REQUIRES(context, channels_ == 1 || channels_ == 3,
                errors::InvalidArgument("channels must be 1 or 3, not ", channels_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& jpegs = context->input(0);
    const Tensor& frame_shape = context->input(1);
    const Tensor& offsets = context->input(2);
    OP_REQUIRES(context, jpegs.dims() == 1 || jpegs.dims() == 2,
                errors::InvalidArgument("jpegs must be [frames] or [frames, groups]"));
    OP_REQUIRES(context, frame_shape.NumElements() == 2 && offsets.NumElements() == 2,
                errors::InvalidArgument("frame_shape and offsets must have 2 values"));
    const int64_t frames = jpegs.dim_size(0);
    const int groups = jpegs.dims() == 2 ? jpegs.dim_size(1) : 1;
    Window window;
    window.height = frame_shape.flat<int32_t>()(0);
    window.width = frame_shape.flat<int32_t>()(1);
    window.y = offsets.flat<int32_t>()(0);
    window.x = offsets.flat<int32_t>()(1);
    window.size = size_;
    window.channels = channels_;
    window.stride = groups * channels_;
    OP_REQUIRES(context, window.y >= 0 && window.x >= 0 &&
                             window.y + size_ <= window.height && window.x + size_ <= window.width,
                errors::InvalidArgument("the window at (", window.y, ", ", window.x, ") of size ",
                                        size_, " is not inside ", window.height, " x ",
                                        window.width, " frames"));
    Tensor* windows = nullptr;
    Tensor* status = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(
                                0, TensorShape({frames, size_, size_, window.stride}), &windows));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({frames}), &status));
    const auto bytes = jpegs.flat<tstring>();
    uint8_t* out = windows->flat<uint8_t>().data();
    const int64_t frame_bytes = int64_t{size_} * size_ * window.stride;
    std::vector<JSAMPLE> row(static_cast<size_t>(window.width) * channels_);
    for (int64_t frame = 0; frame < frames; ++frame) {
      FrameStatus frame_status = kDecoded;
      for (int group = 0; group < groups && frame_status == kDecoded; ++group) {
        window.out = out + frame * frame_bytes + group * channels_;
        frame_status = DecodeWindow(bytes(frame * groups + group), window, row.data());
      }
      if (frame_status != kDecoded) std::memset(out + frame * frame_bytes, 0, frame_bytes);
      status->flat<int32_t>()(frame) = frame_status;
    }
  }

 private:
  int size_;
  int channels_;
};

// (height, width) from a JPEG's header, (-1, -1) when it has none that parses: unlike
// tf.io.extract_jpeg_shape it never fails, so damaged bytes stay a per-frame matter.
class JpegHeaderShapeOp : public OpKernel {
 public:
  explicit JpegHeaderShapeOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    Tensor* shape = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({2}), &shape));
    int height = -1, width = -1;
    ReadHeader(context->input(0).scalar<tstring>()(), &height, &width);
    shape->flat<int32_t>()(0) = height;
    shape->flat<int32_t>()(1) = width;
  }

 private:
  static void ReadHeader(const tstring& jpeg, int* height, int* width) {
    if (!IsJpeg(jpeg)) return;
    Decompressor decompressor;
    jpeg_decompress_struct& cinfo = decompressor.cinfo;
    CatchErrors(&decompressor);
    if (setjmp(decompressor.error.jump)) {
      jpeg_destroy_decompress(&cinfo);
      return;
    }
    Open(&decompressor, jpeg);
    if (jpeg_read_header(&cinfo, TRUE) == JPEG_HEADER_OK) {
      *height = cinfo.image_height;
      *width = cinfo.image_width;
    }
    jpeg_destroy_decompress(&cinfo);
  }
};

REGISTER_OP("DecodeJpegWindows")
    .Input("jpegs: string")
    .Input("frame_shape: int32")
    .Input("offsets: int32")
    .Attr("size: int >= 1")
    .Attr("channels: int")
    .Output("windows: uint8")
    .Output("status: int32")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle jpegs = c->input(0);
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(jpegs, 1, &jpegs));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(jpegs, 2, &jpegs));
      int size, channels;
      TF_RETURN_IF_ERROR(c->GetAttr("size", &size));
      TF_RETURN_IF_ERROR(c->GetAttr("channels", &channels));
      shape_inference::DimensionHandle depth = c->MakeDim(channels);
      if (c->Rank(jpegs) == 2) {
        TF_RETURN_IF_ERROR(c->Multiply(c->Dim(jpegs, 1), channels, &depth));
      }
      shape_inference::DimensionHandle frames = c->Dim(jpegs, 0);
      c->set_output(0, c->MakeShape({frames, c->MakeDim(size), c->MakeDim(size), depth}));
      c->set_output(1, c->Vector(frames));
      return ::tensorflow::OkStatus();
    })
    .Doc(R"doc(
The window [y, y + size) x [x, x + size) of each JPEG frame, as tf.io.decode_jpeg with
dct_method='INTEGER_ACCURATE' and then slicing would give it.

jpegs: [U] one JPEG per frame, or [U, G] G JPEGs per frame (flow: u and v), stacked along
  the channels.
frame_shape: (height, width) every frame must have; frames of another size are status 2.
offsets: (y, x), the window's top left.
windows: uint8 [U, size, size, G * channels]; zeros where status is not 0.
status: int32 [U]: 0 decoded, 1 does not decode (tf.io.decode_jpeg fails too), 2 not
  decoded here (another size, not JPEG bytes, CMYK): use TensorFlow's decode.
)doc");

REGISTER_KERNEL_BUILDER(Name("DecodeJpegWindows").Device(DEVICE_CPU), DecodeJpegWindowsOp);

REGISTER_OP("JpegHeaderShape")
    .Input("jpeg: string")
    .Output("shape: int32")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      c->set_output(0, c->Vector(2));
      return ::tensorflow::OkStatus();
    })
    .Doc("(height, width) of a JPEG from its header; (-1, -1) where none parses.");

REGISTER_KERNEL_BUILDER(Name("JpegHeaderShape").Device(DEVICE_CPU), JpegHeaderShapeOp);

}  // namespace
}  // namespace slimdeploy
