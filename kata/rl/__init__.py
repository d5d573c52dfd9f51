"""The RL parts the loops run on; they import only kata.concepts (never a tool, never solutions/).

    cartpole.py       CartPole-v1 written out: N self-resetting environments with Gymnasium's API
    networks.py       the actor and the critic, action log-probabilities, the optimizers (Adam, SGD), torch's threads
    ppo.py            the PPO loop top to bottom, its configuration and profiles, and the runs' aggregation
    rloo.py           the RLOO loop: profiles, what an iteration reports, the loop
    sequence_task.py  the tiny sequence task: vocabulary, prompts, verifier, the GRU policy, its evaluation
"""

PROFILES: tuple[str, ...] = ("smoke", "full")  # the sizes of a training run: a quick end-to-end run; every seed, longer
