"""The kinds of work that `scripts/featurize-profile.sh` reports, on hand-written call stacks
shaped like `perf script -F tid,ip,sym` output (leaf first, tab-indented frames)."""

import importlib.util
import io
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "featurize_profile_kinds.py"
SPEC = importlib.util.spec_from_file_location("featurize_profile_kinds", SCRIPT)
kinds = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kinds)

RAYON = [
    "rayon::iter::plumbing::Producer::fold_with",
    "rayon::iter::plumbing::bridge_producer_consumer::helper",
    "rayon_core::join::join_context::{{closure}}",
]
STEP = [
    "dashrank::featurize::step::<impl dashrank::featurize::exec::Run>::step_rows",
    "dashrank::featurize::exec::Run::run_bands",
]


@pytest.mark.parametrize(
    "frames, kind",
    [
        # A band's output coordinates: `Coords::strided` inlined into `band_coords`, its
        # merge closure run by a parallel loop.
        (["core::ops::function::impls::<impl FnMut<A> for &F>::call_mut", *RAYON,
          "dashrank::featurize::step::band_coords", *STEP], "maps"),
        (["dashrank::featurize::lone::LoneFilter::count_row",
          "dashrank::featurize::jobs::task_jobs", *RAYON, *STEP], "maps"),
        (["dashrank::featurize::rulebook::blocks_avx512",
          "dashrank::featurize::rulebook::sink_in_blocks", *RAYON, *STEP], "maps"),
        (["dashrank::simd::conv::x86::gemm_avx512",
          "dashrank::featurize::ops::sparse_conv::DirectTiles::flush", *RAYON, *STEP], "products"),
        (["dashrank::simd::pool::sum_rows_f64::avx512_impl", *RAYON, *STEP], "pooling"),
        # A copy counts as buffers whoever calls it.
        (["__memmove_avx512_unaligned_erms", "dashrank::featurize::rulebook::sink_in_blocks",
          *STEP], "buffers"),
        (["rayon_core::registry::WorkerThread::wait_until_cold",
          "rayon_core::registry::ThreadBuilder::run"], "threads"),
        (["dashrank::featurize::exec::Run::trim", "dashrank::featurize::exec::Run::run_bands"],
         "other"),
        (["dashrank::pattern::CsrPattern::read_waco_csr", "featurize_timing::main"], "input"),
    ],
)
def test_each_sample_counts_for_its_first_frame_that_names_a_kind(frames, kind):
    assert kinds.kind_of(frames) == kind


def test_samples_are_split_at_their_header_lines():
    listing = (
        "  4242 \n"
        "\tffff dashrank::simd::conv::x86::gemm_avx512\n"
        "\tffff dashrank::featurize::ops::sparse_conv::DirectTiles::flush\n"
        "\n"
        "4243 \n"
        "\tffff dashrank::featurize::step::band_coords\n"
    )
    got = list(kinds.samples(io.StringIO(listing)))
    assert got == [
        ["dashrank::simd::conv::x86::gemm_avx512",
         "dashrank::featurize::ops::sparse_conv::DirectTiles::flush"],
        ["dashrank::featurize::step::band_coords"],
    ]
