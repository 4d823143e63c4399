"""Elementwise kinematics on awkward (or numpy) arrays of any backend.

Everything is computed in float64 from (pt, eta, phi, mass): NanoAOD stores float32,
and a derived quantity that lands near a bin edge or an arg-min that is nearly tied
must not depend on float32 rounding. Only ufuncs and awkward's elementwise functions
are used, so the same code runs on "cpu" and "cuda" arrays (awkward dispatches the
ufuncs to the array's backend). A four-vector is a tuple ``(px, py, pz, e)``.
"""

from __future__ import annotations

import awkward as ak
import numpy as np


def f64(x):
    """``x`` as float64 (no copy if it is already)."""
    if isinstance(x, ak.Array):
        return ak.values_astype(x, np.float64)
    return np.asarray(x, dtype=np.float64)


def p4(pt, eta, phi, mass):
    pt, eta, phi, mass = f64(pt), f64(eta), f64(phi), f64(mass)
    px = pt * np.cos(phi)
    py = pt * np.sin(phi)
    pz = pt * np.sinh(eta)
    e = np.sqrt(px * px + py * py + pz * pz + mass * mass)
    return px, py, pz, e


def add(*vectors):
    """Component-wise sum, left to right."""
    total = vectors[0]
    for v in vectors[1:]:
        total = tuple(a + b for a, b in zip(total, v))
    return total


def mass(v):
    px, py, pz, e = v
    m2 = e * e - (px * px + py * py + pz * pz)
    return np.sqrt(np.maximum(m2, 0.0))


def pt(v):
    px, py, _, _ = v
    return np.sqrt(px * px + py * py)


def delta_phi(phi1, phi2):
    """phi1 - phi2 wrapped into [-pi, pi)."""
    return np.mod(f64(phi1) - f64(phi2) + np.pi, 2 * np.pi) - np.pi


def delta_r(eta1, phi1, eta2, phi2):
    deta = f64(eta1) - f64(eta2)
    dphi = delta_phi(phi1, phi2)
    return np.sqrt(deta * deta + dphi * dphi)


def transverse_mass(pt1, phi1, pt2, phi2):
    """Transverse mass of two massless objects (MET and a lepton)."""
    return np.sqrt(2.0 * f64(pt1) * f64(pt2) * (1.0 - np.cos(f64(phi1) - f64(phi2))))
