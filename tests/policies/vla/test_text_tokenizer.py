from transformers import AutoTokenizer

from vla_rl.policies.vla.text_tokenizer import IMAGE_TOKEN, action_token, build_text_tokenizer


def test_action_tokens_take_the_last_ids_and_local_reload_matches(tmp_path):
    tokenizer = build_text_tokenizer(["pick up the red cube"], num_action_tokens=256)
    vocab_size = len(tokenizer)
    assert [tokenizer.convert_tokens_to_ids(action_token(k)) for k in (0, 255)] == [
        vocab_size - 256,
        vocab_size - 1,
    ]
    assert tokenizer.convert_tokens_to_ids(IMAGE_TOKEN) < vocab_size - 256
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    text = ["Pick up the red cube\n", "pick up the blue cube"]
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    ids = tokenizer("pick up the blue cube\n", add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["pick", "up", "the", "<unk>", "cube", "\n"]
