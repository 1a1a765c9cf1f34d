// The HBM footprint of an array on a TPU v6e core, where arrays are stored
// in tiles rather than densely (XLA's tiled layouts, docs/tiled_layout.md in
// openxla/xla):
//
//   rank >= 2  the two minor dimensions (by the layout's minor_to_major;
//              row-major: the last two) are rounded up to the tile:
//              (8,128) for 32-bit types, (8,128) for 16-bit types too
//              (XLA:TPU v6e lays out every bf16 array as T(8,128)(2,1): 8x128
//              tiles with row pairs packed into 32-bit words; seen in all the
//              optimised modules libtpu 0.0.52 returns for tpuoff's kernels),
//              (32,128) for 8-bit types, (8,128) for 64-bit types (emulated
//              as 32-bit pairs).
//              f32[3,5] -> 8x128x4 bytes; bf16[3,5] -> 8x128x2 bytes.
//   rank 1     the dimension is rounded up to 1024 elements: XLA:TPU lays
//              out vectors as {0:T(1024)} (f32/s32) and {0:T(1024)(128)(2,1)}
//              (bf16), one 4 KiB tile of 32-bit words per 1024 elements.
//              (XLA uses T(128)/T(256) for some short vectors; the rule
//              here may overstate those by < 4 KiB each.)
//   rank 0     128 elements ({:T(128)} in XLA:TPU dumps).
//
// PRED takes 4 bytes per element on TPU (XLA's tiled-layout notes), so its
// padded size uses 4-byte elements and (8,128) tiles. XLA:TPU's "small tile"
// layouts ((2,128), (4,128) for second-minor dims of 1-4) are not modelled:
// such arrays are counted with the full tile, an upper bound.
#ifndef TPUOFF_HLO_ANALYSIS_TPU_LAYOUT_H_
#define TPUOFF_HLO_ANALYSIS_TPU_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/ir/shape.h"

namespace tpuoff::hlo {

struct TpuTile {
  int64_t sublanes = 8;       // second-minor dimension of the tile
  int64_t lanes = 128;        // minor dimension of the tile
  int64_t element_bytes = 4;  // storage bytes per element on TPU
};

// The (sublanes, lanes) tile of rank >= 2 arrays of `type`.
TpuTile TpuTileFor(PrimitiveType type);

// Dimensions after padding, in logical order: rank >= 2 with the minor two
// rounded up; rank 1 rounded up to 1024; rank 0 as [128]. Empty for
// non-arrays.
std::vector<int64_t> TpuPaddedDimensions(const Shape& shape);

// Bytes of `shape` in v6e HBM: padded elements x storage bytes; tuples sum
// their leaves; tokens 0.
int64_t TpuPaddedBytes(const Shape& shape);

// "T(8,128)", "T(16,128)", "T(1024)", "T(128)": the tiling applied.
std::string TpuTilingName(const Shape& shape);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_TPU_LAYOUT_H_
