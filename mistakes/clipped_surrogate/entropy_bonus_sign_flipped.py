from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import ppo_loss_inputs


def ppo_loss(policy_loss, value_loss, entropy, value_coefficient, entropy_coefficient):
    policy, value, entropy_t, c_value, c_entropy = ppo_loss_inputs(
        policy_loss, value_loss, entropy, value_coefficient, entropy_coefficient
    )
    total = policy + c_value * value + c_entropy * entropy_t.mean()
    return like_inputs(total, policy_loss, value_loss, entropy)
