import matplotlib.image

from benchmarks.sft_plot import plot


def test_plot_draws_each_decoding_a_row_measured(tmp_path):
    row = {"decoding": "sampled", "success_by_decoding": {"sampled": 0.9, "argmax": 0.7}}
    results = {"token_vla": {"0": row, "5": {"decoding": "sampled", "success_by_decoding": {"sampled": 0.0}}}}
    path = tmp_path / "curve.png"
    plot(results, 1000, 0.8, path)
    assert matplotlib.image.imread(path).shape[:2] == (432, 648)  # 5.4 x 3.6 inches at 120 dpi
