"""The built-in campaign protocols, one :func:`~service.campaigns.protocols.base.register` call each: what each
takes (its options, declared once), answers and says of itself, and where the functions that run it live.

This is every protocol's declaration, and it imports only the devices' specs (:mod:`workloads.local.protocols`) and
the declarations' own modules: the command line builds the flags of ``campaign create`` and ``campaign plan``, the
API its description of a campaign's ``options`` and docs/campaigns.md its options table from it, without loading an
estimator (``tests/service/cli/test_cli_imports.py``). The builder, transition, fit and planner of a protocol are in
its module of this package (``glm.py``, ...) or of :mod:`estimators.local`, named by :class:`~.base.Deferred` and
imported when first called; each builder reads only the options declared here (the protocol contract test fails on
any other read).

An option several protocols declare alike is one :class:`~service.options.OptionSpec` (``PARTICIPANTS``,
``LABEL_BOUND``, ...), so the command line and the API show one declaration for all of them; protocols that mean
different things by one name (each ``randomizer``) keep their own.
"""

from __future__ import annotations

import math

from service.campaigns.protocols.base import CampaignProtocol, Deferred, register
from service.options import OptionSpec
from workloads.links import LINKS
from workloads.local.protocols import LdpAverageSpec, SteinGlmSpec, TwoRoundSteinSpec
from workloads.local.protocols.bernstein import BernsteinSpec, OneBitBernsteinSpec
from workloads.local.protocols.dr_erm import DrErmSpec
from workloads.local.protocols.glm import DEFAULT_RANDOMIZER, GLM_RANDOMIZERS, LABEL_KINDS, GlmSpec
from workloads.local.protocols.label_ldp import LABEL_RANDOMIZERS, LabelLdpSpec
from workloads.local.protocols.ldp_iht import GRADIENT_RANDOMIZERS, LdpIhtSpec
from workloads.local.protocols.linear_ssp import LinearSspSpec
from workloads.local.protocols.marginals import MarginalsSpec
from workloads.local.protocols.stein_glm import VARIANTS as STEIN_VARIANTS
from workloads.local.protocols.vector_reports import DEFAULT_VECTOR_RANDOMIZER, VECTOR_RANDOMIZERS
from workloads.local.randomizers.frequency_oracles import ORACLES
from workloads.local.randomizers.regression_statistics import STATISTICS_RANDOMIZERS


def run(where: str) -> Deferred:
    """A function of this package's modules (``"glm:build"``) or, with a dot, any module's."""
    return Deferred(where if "." in where.split(":")[0] else f"service.campaigns.protocols.{where}")


# ---------------------------------------------------------------------------------------------- options shared alike
PARTICIPANTS = OptionSpec("participants", int, "the planned number of participants: a round closes by itself when "
                          "its group has reported (ldp-iht splits them into its T groups), and campaign plan "
                          "predicts the error at it")
LABEL_BOUND = OptionSpec("label_bound", float, "the public bound B on |y| (labels are clipped to [-B, B])",
                         default=1.0)
RADIUS = OptionSpec("radius", float, "the radius R of the set the estimate is confined to", default=1.0)
ETA = OptionSpec("eta", float, "the step size of the hard-thresholding iterations", default=1.0)
SPARSITY = OptionSpec("sparsity", int, "the s kept by hard thresholding (required, at most the number of features)")
#: a Stein GLM's norm of the clip (paper variant and Alg. 5)
NORM = OptionSpec("norm", str, "the norm x is clipped in: l2 for Gaussian features, l1 for bounded ones",
                  default="l2", choices=("l2", "l1"))


def _norm_bound(default: str) -> OptionSpec:
    return OptionSpec("norm_bound", float, f"the public bound on a participant's ||x|| (default: {default})")


# ---------------------------------------------------------------------------------------------------------- ldp-avg
LDP_AVG_OPTIONS = (
    OptionSpec("lower", float, "the public lower bound of the value (default: the public table's minimum)",
               low=-math.inf),
    OptionSpec("upper", float, "the public upper bound of the value (default: the public table's maximum)",
               low=-math.inf),
    PARTICIPANTS,
)
register(CampaignProtocol(
    "ldp-avg", LdpAverageSpec, run("ldp_avg:build"), None, ("mean",), run("ldp_avg:fit"), "none",
    "1-dim LDP-AVG: one bounded number per participant, Laplace", transform=False,
    plan=run("estimators.local.ldp_avg:ldp_avg_error_model"), options=LDP_AVG_OPTIONS,
    pure="pure epsilon-LDP, Laplace"))

# -------------------------------------------------------------------------------------- stein-glm, stein-glm-2round
#: the public quantile of ``||W x||`` over the public rows that the public-gram variant clips at by default: clipping
#: biases ``E[x y]`` (at the median, coefficients 1.5x too long on Gaussian features; at 0.9, 6 %), a larger bound
#: costs noise; measured in docs/stein-glm-results.md (benchmarks/stein_glm_clipping.py)
DEFAULT_NORM_QUANTILE = 0.9
#: what a Stein GLM campaign answers: the private OLS and every link (:data:`workloads.links.LINKS`, which
#: :mod:`estimators.local.glm.links` extends)
STEIN_MODELS = ("linear", *LINKS)
STEIN_OPTIONS = (
    OptionSpec("variant", str, "public-gram: x y only, X^T X from the public rows (the default with a public "
               "table); paper: noisy (x x^T, x y) as in Alg. 1 (the default without one)", choices=STEIN_VARIANTS),
    OptionSpec("randomizer", str, "variant=public-gram: the devices' randomizer (privunit and l2ball pure epsilon, "
               "gaussian (epsilon, delta))", default=DEFAULT_VECTOR_RANDOMIZER, choices=tuple(VECTOR_RANDOMIZERS)),
    OptionSpec("norm_quantile", float, f"variant=public-gram: the public quantile of ||W x|| the norm bound is "
               f"(default {DEFAULT_NORM_QUANTILE}; or a stated norm_bound)", high=1),
    _norm_bound("variant=public-gram: the norm_quantile of the public rows; variant=paper: Alg. 1's bound from the "
                "public table"),
    OptionSpec("label_bound", float, "the public bound B on |y - label_center| (default 1; variant=public-gram with "
               "neither label_bound nor label_center: labels in [0, 1])"),
    OptionSpec("label_center", float, "variant=public-gram: labels in [label_center - label_bound, label_center + "
               "label_bound] (default 0, or 0.5 with no label_bound)", low=-math.inf),
    OptionSpec("whiten", bool, "variant=public-gram: whiten the features by the public covariance", default=True),
    NORM,
    OptionSpec("gram", bool, "variant=paper: report x x^T beside x y", default=True),
    OptionSpec("xy_ratio", float, "variant=paper: the noise on x y over the noise on x x^T (default sqrt(2) B / r)"),
    PARTICIPANTS,
)
STEIN_TWO_ROUND_OPTIONS = (
    OptionSpec("layout", str, "split-budget: every participant reports twice, half the budget each; split-groups: "
               "two disjoint groups report once", default="split-budget", choices=("split-budget", "split-groups")),
    _norm_bound("from covariance_norm, else Alg. 1's bound from the public table"),
    OptionSpec("covariance_norm", float, "the public ||Sigma||_2 of the features: norm_bound = sqrt(10 p "
               "||Sigma||_2 log n), Alg. 5 (needs participants)"),
    LABEL_BOUND,
    NORM,
    OptionSpec("projection_scale", float, "round 1 clips <x, w_ols> at this times round 0's estimate of its standard "
               "deviation", default=4.0),
    PARTICIPANTS,
    OptionSpec("first_size", int, "layout=split-groups: the first group's size"),
    OptionSpec("second_size", int, "layout=split-groups: the second group's size"),
)
register(CampaignProtocol(
    "stein-glm", SteinGlmSpec, run("stein_glm:build_one_round"), None, STEIN_MODELS, run("stein_glm:fit_one_round"),
    "required", "the Stein-lemma GLMs, one round: by default (with a public table) x y only, X^T X from the public "
    "rows, an estimated intercept; variant=paper: noisy (x x^T, x y) as in Alg. 1",
    plan=run("stein_glm:plan_one_round"), options=STEIN_OPTIONS))
register(CampaignProtocol(
    "stein-glm-2round", TwoRoundSteinSpec, run("stein_glm:build_two_round"),
    run("estimators.local.glm.two_round:next_state"), STEIN_MODELS, run("stein_glm:fit_two_round"), "required",
    "Alg. 5, two rounds without public data", options=STEIN_TWO_ROUND_OPTIONS))

# -------------------------------------------------------------------------------------------------------------- glm
#: what a glm campaign answers: every link of the public-moment equation (:data:`estimators.local.glm.moment.
#: MOMENT_LINKS`; tests/service/campaigns/test_protocol_contract.py checks the two agree)
GLM_MODELS = ("logistic", "probit", "linear", "poisson")
GLM_OPTIONS = (
    OptionSpec("randomizer", str, "the devices' randomizer: privunit (PrivUnit2) and l2ball are pure epsilon (delta "
               "0), gaussian is (epsilon, delta)", default=DEFAULT_RANDOMIZER, choices=tuple(GLM_RANDOMIZERS)),
    OptionSpec("labels", str, "binary: y in {0, 1}; bounded: s(y) = clip(y, -B, B) / B with label_bound B",
               default="binary", choices=LABEL_KINDS),
    OptionSpec("label_bound", float, "labels=bounded: the public bound B on |y| (default 1; refused with binary "
               "labels)"),
    OptionSpec("whiten", bool, "whiten the features by the public covariance (false: standardise them; default: "
               "whiten when the public covariance is invertible)"),
    PARTICIPANTS,
)
register(CampaignProtocol(
    "glm", GlmSpec, run("glm:build"), None, GLM_MODELS, run("glm:fit"), "required",
    "the public-moment GLM, one round of R(s(y) z(x)), the recommended GLM protocol with a public table",
    plan=run("glm:plan"), options=GLM_OPTIONS))

# ---------------------------------------------------------------------------------------------------------- ldp-iht
#: ``variant=default`` (issue 20: T = 1, the clip from the label and design bounds) or ``variant=paper`` (Sec. 7.1)
LDP_IHT_VARIANTS = ("default", "paper")
LDP_IHT_OPTIONS = (
    SPARSITY,
    OptionSpec("rounds", int, "T, the rounds (one disjoint group each; default 1, with variant=paper ceil(ln(n / p)))"),
    ETA,
    RADIUS,
    LABEL_BOUND,
    OptionSpec("residual_bound", float, "c, the clip on the residual <theta, x> - y (default min(B_y, 2 R r_x / "
               "sqrt(p)), with variant=paper sqrt(s) R + B_y)"),
    OptionSpec("feature_norm_bound", float, "r_x, the public bound on ||x|| (default sqrt(p))"),
    PARTICIPANTS,
    OptionSpec("variant", str, "the defaults of rounds and residual_bound: issue 20's or Sec. 7.1's", default="default",
               choices=LDP_IHT_VARIANTS),
    OptionSpec("randomizer", str, "l2ball: the whole gradient through the l2-ball randomizer; coordinate: one "
               "uniformly drawn coordinate", default="l2ball", choices=GRADIENT_RANDOMIZERS),
    OptionSpec("feature_bound", float, "randomizer=coordinate: the public bound on |x_j| (default r_x / sqrt(p))"),
)
register(CampaignProtocol(
    "ldp-iht", LdpIhtSpec, run("ldp_iht:build"), run("estimators.local.sparse.ldp_iht_rounds:next_state"),
    ("iht",), run("ldp_iht:fit"), "required",
    "LDP-IHT (Wang & Xu 2019, Alg. 1): T rounds, T disjoint groups, l2-ball gradients",
    plan=run("estimators.local.sparse.planning:ldp_iht_error_model"), options=LDP_IHT_OPTIONS,
    pure="the l2-ball randomizer is pure epsilon-LDP"))

# -------------------------------------------------------------------------------------------------------- label-ldp
LABEL_LDP_OPTIONS = (
    OptionSpec("randomizer", str, "the label reports: pure is Duchi et al.'s +-C, (epsilon, 0)-LDP (a delta is not "
               "spent); gaussian is (epsilon, delta)-LDP and needs a delta", default="pure",
               choices=LABEL_RANDOMIZERS),
    SPARSITY,
    OptionSpec("iterations", int, "IHT's iterations (default ceil(ln(n / p)), n the planned participants or the "
               "public rows)"),
    ETA,
    RADIUS,
    OptionSpec("alpha", float, "the Lasso's lambda (default: Sec. 5's order made explicit)"),
    LABEL_BOUND,
    OptionSpec("feature_bound", float, "the public bound on |x_j| (default: the largest of the transformed public "
               "table)"),
    PARTICIPANTS,
)
register(CampaignProtocol(
    "label-ldp", LabelLdpSpec, run("label_ldp:build"), None, ("iht", "lasso", "lasso-raw"), run("label_ldp:fit"),
    "required", "public features, pure-epsilon (default) or Gaussian label reports; answers IHT (Alg. 2) and the "
    "Lasso (Sec. 5; model lasso refits least squares on its support, lasso-raw does not)",
    plan=run("estimators.local.sparse.planning:label_ldp_error_model"), options=LABEL_LDP_OPTIONS))

# ------------------------------------------------------------------------------------------ bernstein, bernstein-1bit
BERNSTEIN_OPTIONS = (
    OptionSpec("degree", int, "k, the Bernstein polynomial's degree per dimension", default=6),
    OptionSpec("order", int, "h, the iterated Bernstein order", default=2),
    OptionSpec("lower", float, "the lower end of the parameter box", default=-1.0, low=-math.inf),
    OptionSpec("upper", float, "the upper end of the parameter box", default=1.0, low=-math.inf),
    OptionSpec("loss_scale", float, "the public bound of the squared loss over the box (default: its largest value "
               "from feature_bound and label_bound)"),
    OptionSpec("feature_bound", float, "the public bound on |x_j| the default loss_scale is taken from", default=1.0),
    LABEL_BOUND,
    PARTICIPANTS,
)
register(CampaignProtocol(
    "bernstein", BernsteinSpec, run("bernstein:build_laplace"), None, ("linear",), run("bernstein:fit"), "required",
    "Local Bernstein Mechanism (Wang, Gaboardi & Xu 2018, Alg. 2), squared loss, p <= 3", transform=False,
    options=BERNSTEIN_OPTIONS, pure="Laplace noise"))
register(CampaignProtocol(
    "bernstein-1bit", OneBitBernsteinSpec, run("bernstein:build_one_bit"), None, ("linear",), run("bernstein:fit"),
    "required", "its 1-bit variant (Alg. 3), same options", transform=False, options=BERNSTEIN_OPTIONS,
    pure="one randomized bit"))

# ----------------------------------------------------------------------------------------------------------- dr-erm
DR_ERM_OPTIONS = (
    OptionSpec("rows", int, "m, the dimension of the public random projection", default=20),
    OptionSpec("constraint", str, "the set C the coefficients are recovered in: the l1 ball or the simplex",
               default="l1", choices=("l1", "simplex")),
    RADIUS,
    OptionSpec("feature_radius", float, "the clip on ||Phi x||", default=1.0),
    LABEL_BOUND,
    PARTICIPANTS,
)
register(CampaignProtocol(
    "dr-erm", DrErmSpec, run("dr_erm:build"), None, ("linear",), run("dr_erm:fit"), "required",
    "DR-ERM-LDP (Alg. 4): public random projection, l2-ball projected statistics, recovery over the l1 ball or the "
    "simplex", transform=False, options=DR_ERM_OPTIONS, pure="the l2-ball randomizer"))

# ------------------------------------------------------------------------------------------------------- linear-ssp
LINEAR_SSP_OPTIONS = (
    OptionSpec("norm_bound", float, "r, the public l2 bound on the transformed features (default: the largest norm "
               "of a transformed public row, else sqrt(p) with stated feature_bounds)"),
    LABEL_BOUND,
    OptionSpec("randomizer", str, "the devices' randomizer: l2ball is pure epsilon (delta 0), gaussian is "
               "(epsilon, delta)", default="l2ball", choices=tuple(STATISTICS_RANDOMIZERS)),
    OptionSpec("ridge", float, "a public ridge lambda added to X^T X (default: AdaSSP's rule)", low=0, low_open=False),
    PARTICIPANTS,
)
register(CampaignProtocol(
    "linear-ssp", LinearSspSpec, run("linear_ssp:build"), None, ("linear",), run("linear_ssp:fit"), "required",
    "low-dimensional linear regression with an intercept: one randomized vector of sufficient statistics per "
    "participant", plan=run("linear_ssp:plan"), options=LINEAR_SSP_OPTIONS))

# -------------------------------------------------------------------------------------------------------- marginals
MARGINALS_OPTIONS = (
    OptionSpec("domain", None, "the number of codes of each attribute, {\"A\": 16, ...} (API) or A=16;B=32 (command "
               "line); default: the public table's coded columns"),
    OptionSpec("way", int, "the attribute sets are every subset of this many attributes (not with sets; default: "
               "every attribute, and the pairs of few enough cells for the participants)"),
    OptionSpec("sets", None, "the attribute sets participants are split among, [[\"A\", \"B\"], [\"C\"]] (API) or "
               "A,B;C (command line); default: every attribute, and the pairs whose own estimate at their share "
               "of the participants is expected within L1 0.25"),
    OptionSpec("oracle", str, "the frequency oracle: auto takes the least variance for each set's cells and epsilon "
               "(grr or olh, sometimes hadamard); oue sends one bit per cell", default="auto",
               choices=("auto", *ORACLES)),
    PARTICIPANTS,
)
register(CampaignProtocol(
    "marginals", MarginalsSpec, run("marginals:build"), None, (), None, "none",
    "marginals and synthetic rows: each participant reports her cell of one attribute set's marginal through a "
    "frequency oracle", transform=False, plan=run("estimators.local.marginals_planning:marginals_error_model"),
    options=MARGINALS_OPTIONS, pure="pure epsilon-LDP, frequency oracles", marginals=True))
