import torch
from flow_fixtures import make_flow_mlp, make_obs

from vla_rl.policies.flow.chunk_padding import fill_padded_steps
from vla_rl.policies.flow.flow_mlp import FlowMLPPolicy, sinusoidal_time_embedding
from vla_rl.policies.registry import load_chunk_policy

torch.set_num_threads(1)

MODES = torch.tensor([[0.5, 0.5], [-0.5, -0.5]])


def constant_obs(batch: int) -> dict:
    return {"proprio": torch.zeros(batch, 1), "instruction": [""] * batch}


def test_flow_matching_fits_a_bimodal_2d_target(seed: int = 0):
    policy = make_flow_mlp(seed, chunk_len=1, action_dim=2, proprio_dim=1, hidden_sizes=[128, 128]).train()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    batch, losses = 256, []
    for _ in range(200):
        actions = MODES[torch.randint(0, 2, (batch,))][:, None]
        loss = policy.sft_loss(constant_obs(batch), actions, torch.ones(batch, 1, dtype=torch.bool)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-20:]) / 20 < 0.6 * sum(losses[:20]) / 20
    samples = policy.eval().sample(constant_obs(500), deterministic=True).actions[:, 0]
    distances = torch.cdist(samples, MODES)
    assert (distances.min(dim=1).values < 0.25).float().mean() > 0.8
    share_of_first_mode = (distances.argmin(dim=1) == 0).float().mean()
    assert 0.35 < share_of_first_mode < 0.65


def test_evaluate_recomputes_the_sampled_log_prob_and_value():
    policy = make_flow_mlp()
    obs = make_obs(6)
    step = policy.sample(obs, temperature=0.7, with_value=True)
    assert step.actions.shape == (6, 2, 3)
    assert step.sample_info["chain"].shape == (6, policy.num_steps + 1, 2, 3)
    assert step.value.shape == (6,)
    evaluation = policy.evaluate(obs, step.sample_info, temperature=0.7, with_value=True)
    torch.testing.assert_close(evaluation.log_prob, step.log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(evaluation.value, step.value)
    assert evaluation.log_prob.requires_grad
    other = policy.evaluate(obs, step.sample_info, temperature=1.4)
    assert not torch.allclose(other.log_prob, step.log_prob)


def test_deterministic_sample_is_the_noise_free_chain():
    policy = make_flow_mlp()
    obs = make_obs(3)
    step = policy.sample(obs, deterministic=True)
    chain = step.sample_info["chain"]
    with torch.no_grad():
        features = policy.features(obs)
        x = chain[:, 0]
        for k in range(policy.num_steps):
            time = torch.full((3,), 1.0 - k / policy.num_steps)
            x = x - policy.velocity(features, x, time) / policy.num_steps
    torch.testing.assert_close(chain[:, -1], x, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(step.actions, x.clamp(-1, 1), atol=1e-5, rtol=1e-5)


def test_padded_steps_are_filled_with_the_last_real_action():
    actions = torch.tensor([[[1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0]]])
    mask = torch.tensor([[True, False, False], [False, True, False]])
    filled = fill_padded_steps(actions, mask)
    assert filled[:, :, 0].tolist() == [[1.0, 1.0, 1.0], [0.0, 5.0, 5.0]]


def test_sft_loss_ignores_padded_chunk_steps():
    policy = make_flow_mlp()
    obs = make_obs(4)
    actions = torch.rand(4, 2, 3) * 2 - 1
    mask = torch.tensor([[True, False]] * 4)
    torch.manual_seed(5)
    loss = policy.sft_loss(obs, actions, mask).loss
    garbage = actions.clone()
    garbage[:, 1] = 100.0
    torch.manual_seed(5)
    assert policy.sft_loss(obs, garbage, mask).loss.item() == loss.item()
    torch.manual_seed(5)
    assert policy.sft_loss(obs, garbage, torch.ones(4, 2, dtype=torch.bool)).loss.item() > 100.0


def test_save_load_round_trip_gives_identical_actions(tmp_path):
    policy = make_flow_mlp(image_keys=["rgb_front"], image_shape=[32, 32])
    obs = make_obs(3)
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy("flow_mlp", tmp_path).eval()
    assert isinstance(loaded, FlowMLPPolicy)
    torch.manual_seed(3)
    before = policy.sample(obs, with_value=True)
    torch.manual_seed(3)
    after = loaded.sample(obs, with_value=True)
    assert torch.equal(before.actions, after.actions)
    assert torch.equal(before.log_prob, after.log_prob)
    assert torch.equal(before.value, after.value)


def test_pixel_features_depend_on_the_image():
    policy = make_flow_mlp(image_keys=["rgb_front"], image_shape=[32, 32])
    obs = make_obs(2)
    other = dict(obs, rgb_front=255 - obs["rgb_front"])
    assert not torch.allclose(policy.features(obs), policy.features(other))


def test_time_embedding_by_hand():
    embedding = sinusoidal_time_embedding(torch.tensor([0.0, 0.25]), 4)
    # periods 0.1 and 4.0: sin(2 pi 0.25 / 0.1) = sin(5 pi) = 0, sin(2 pi 0.25 / 4) = sin(pi / 8)
    torch.testing.assert_close(embedding[0], torch.tensor([0.0, 0.0, 1.0, 1.0]))
    expected = torch.tensor([0.0, 0.382683, -1.0, 0.923880])
    torch.testing.assert_close(embedding[1], expected, atol=1e-5, rtol=0)
