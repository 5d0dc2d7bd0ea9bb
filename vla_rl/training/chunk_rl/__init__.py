"""RL fine-tuning of chunk policies (VLAs, flow policies) from an SFT checkpoint."""
