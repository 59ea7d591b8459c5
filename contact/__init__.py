"""Contact layer: coal collision detection -> contact frames and Jacobians, complementarity
contact solvers and their implicit gradients. (Filled in by the contact issues.)"""
